"""The sim-to-real report of a stored run: its simulated users measured from the transcripts,
the outcome calibration of its tasks made from production traces, and the report redacted."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from harness.fidelity.agreement import BOOTSTRAP, compare_behaviour, percentiles
from harness.fidelity.results import FidelityReport, OutcomeCalibration, OutcomeRow
from harness.grading.result import Verdict
from harness.production.behaviour import SessionBehaviour, measure
from harness.transcript import EndReason, Transcript

if TYPE_CHECKING:
    from harness.store import Store
    from harness.store.tasks import StoredTask


# the ends a simulated user chose (its stop, transfer and out-of-scope signals); after any other
# (a turn limit, a timeout, the agent's handoff or crash) an error in the last reply is no
# abandonment: the user had no turn to react
USER_ENDS = (EndReason.USER_STOP, EndReason.TRANSFER, EndReason.OUT_OF_SCOPE)


def simulated_behaviour(
    transcripts: Iterable[tuple[Transcript, str | None, str | None]], histories: dict[str, int]
) -> tuple[list[SessionBehaviour], list[str], int]:
    """The simulated users of a run's stored transcripts (`Store.transcripts`), each measured
    without its task's prior history (`histories`: task id -> messages of `start.history`):
    (behaviours, their task ids, episodes left out)."""
    found: list[SessionBehaviour] = []
    tasks: list[str] = []
    left_out = 0
    for transcript, _, _ in transcripts:
        messages = transcript.messages[histories.get(transcript.task_id, 0) :]
        cut_off = transcript.end_reason not in USER_ENDS  # the user did not choose to leave
        behaviour = measure(messages, f"{transcript.task_id}#{transcript.trial}", cut_off=cut_off)
        if transcript.end_reason == EndReason.ERROR or behaviour.user_turns == 0:
            left_out += 1
            continue
        found.append(behaviour)
        tasks.append(transcript.task_id)
    return found, tasks, left_out


def outcome_calibration(
    tasks: Sequence[StoredTask],
    verdicts: Iterable[Verdict],
    bootstrap: int = BOOTSTRAP,
    seed: int = 0,
) -> OutcomeCalibration | None:
    """The run's pass rate on its tasks made from production traces against production's
    outcome of the same sessions (see `harness.fidelity`'s doc); None without such a graded
    task."""
    outcomes: dict[str, list[bool]] = {}
    for verdict in verdicts:
        if verdict.outcome != "error":
            outcomes.setdefault(verdict.task_id, []).append(verdict.outcome == "pass")
    rows = []
    for stored in tasks:
        source = stored.spec.get("source") or {}
        graded = outcomes.get(stored.task.id, [])
        if source.get("kind") not in ("success", "failure") or not graded:
            continue
        rows.append(
            OutcomeRow(
                task_id=stored.task.id,
                kind=source["kind"],
                sessions=int(source.get("count") or 1),
                simulated_pass=sum(graded) / len(graded),
                graded=len(graded),
            )
        )
    if not rows:
        return None
    weights = np.array([r.sessions for r in rows], dtype=float)
    real = np.array([r.kind == "success" for r in rows], dtype=float)
    sim = np.array([r.simulated_pass for r in rows])

    def gap(w: np.ndarray) -> float:
        return float(((sim - real) * w).sum() / w.sum())

    rng = np.random.default_rng(seed)
    gaps = [
        gap(weights * np.bincount(rng.integers(0, len(rows), len(rows)), minlength=len(rows)))
        for _ in range(bootstrap)
    ]
    interval = percentiles(gaps)
    assert interval is not None
    return OutcomeCalibration(
        tasks=len(rows),
        sessions=int(weights.sum()),
        production_success=float((real * weights).sum() / weights.sum()),
        simulated_pass=float((sim * weights).sum() / weights.sum()),
        gap=gap(weights),
        gap_interval=interval,
        rows=rows,
    )


def run_fidelity(
    store: Store,
    run_id: str,
    production: Iterable[SessionBehaviour],
    source: str = "",
    bootstrap: int = BOOTSTRAP,
    seed: int = 0,
) -> FidelityReport:
    """`harness fidelity` as one call: a stored run's simulated users against the production
    sessions measured (`behaviour.measure_calls`), with the outcome calibration of its tasks
    made from production traces."""
    tasks = store.run_tasks(run_id)
    histories = {t.task.id: len(t.spec.get("start", {}).get("history") or []) for t in tasks}
    simulated, task_ids, left_out = simulated_behaviour(store.transcripts(run_id), histories)
    report = compare_behaviour(simulated, task_ids, list(production), bootstrap, seed)
    report.run_id, report.source, report.left_out = run_id, source, left_out
    report.outcome = outcome_calibration(tasks, store.latest_verdicts(run_id), bootstrap, seed)
    return redacted(report)


def redacted(report: FidelityReport) -> FidelityReport:
    """The report with every string passed through `harness.secrets.redact_pii`: it names its
    production source and tasks made from production, and is printed, stored and rendered."""
    from harness.secrets import redact_data, redactor

    return FidelityReport.model_validate(redact_data(report.model_dump(), redactor(pii=True)))

"""The sim-to-real report: how far a run's simulated users behave like production's real ones.

Both sides are measured with the same functions (`behaviour.measure`): the simulated users in
each stored episode of the run (the task's prior `history` left out; episodes that ended in a
harness `error` are not a user's behaviour and are left out), and the users of the production
sessions the source and filters give.

Per dimension (`FAMILIES`), the two distributions are summarised side by side and compared:
agreement is 1 - the Kolmogorov-Smirnov distance between them (the largest gap between their
cumulative distributions; for a yes/no dimension, 1 - the gap between the two rates), so 1 is
the same distribution and 0 none in common. A dimension with fewer than `MIN_VALUES` sessions
holding a value on either side (reactions exist only where the agent erred) is left out and
named. The fidelity index is 100 x the mean over the five families of the mean agreement of
their dimensions, so that seven style proxies do not outweigh information disclosure.

Its 95% interval is a basic (reflected) bootstrap interval (`BOOTSTRAP` resamples; `_basic`
says why not the percentiles) that resamples production sessions and, on the simulated side,
tasks with all their episodes (a task's trials are not independent): the interval covers the
index of the two populations, clustered by task.

A dimension is *easy mode* when simulation differs from production in the direction that makes
the agent's job easier (`EASIER`: more front-loaded, less asking back, less pushback, fewer
abandons, more accepting or quietly pivoting), the bootstrap interval of the difference of
means lies entirely on that side, and its agreement is below `EASY_AGREEMENT`.

Outcome calibration compares, on the run's tasks made from production traces (their `source`),
the simulated pass rate with the outcome production had for the same sessions (a `success`
task's sessions succeeded, a `failure` task's failed), both weighted by the task's session
count; a positive gap means simulation is more optimistic than production.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from harness.grading.result import Verdict
from harness.production.behaviour import SessionBehaviour, measure
from harness.transcript import EndReason, Transcript

if TYPE_CHECKING:
    from harness.store import Store
    from harness.store.tasks import StoredTask

FAMILIES: dict[str, tuple[str, ...]] = {
    "information": ("disclosure_first", "ambiguous_start"),
    "clarification": ("asks_back", "question_rate"),
    "error reaction": ("pushback", "rephrase", "pivot", "accept", "abandon"),
    "patience": ("user_turns", "abandoned"),
    "style": (
        "words_per_turn",
        "exclamation_rate",
        "capitals",
        "emoji_rate",
        "typos",
        "formality",
        "ascii_letters",
    ),
}
DIMENSIONS = tuple(name for names in FAMILIES.values() for name in names)
FAMILY_OF = {name: family for family, names in FAMILIES.items() for name in names}
# +1: a higher value makes the agent's job easier; -1: a lower one
EASIER = {
    "disclosure_first": 1,
    "ambiguous_start": -1,
    "asks_back": -1,
    "pushback": -1,
    "rephrase": -1,
    "abandon": -1,
    "abandoned": -1,
    "pivot": 1,
    "accept": 1,
}
EASY_WORDS = {
    "disclosure_first": "front-load more of the facts",
    "ambiguous_start": "open without the needed facts less often",
    "asks_back": "ask back less",
    "pushback": "push back less after an agent error",
    "rephrase": "rephrase less after an agent error",
    "abandon": "abandon less after an agent error",
    "abandoned": "abandon fewer sessions",
    "pivot": "quietly pivot more after an agent error",
    "accept": "accept an agent error more",
}
MIN_VALUES = 5
BOOTSTRAP = 1000
CONFIDENCE = 0.95
EASY_AGREEMENT = 0.9


class Distribution(BaseModel):
    """One side's values of a dimension."""

    model_config = ConfigDict(extra="forbid")

    sessions: int = Field(description="Sessions with a value.")
    mean: float | None = Field(description="Mean (for a yes/no dimension, the rate).")
    p10: float | None = Field(description="10th percentile.")
    median: float | None = Field(description="Median.")
    p90: float | None = Field(description="90th percentile.")


class DimensionAgreement(BaseModel):
    """A dimension compared between simulated and production users."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The dimension (a `SessionBehaviour` field).")
    family: str = Field(description="Its family (`FAMILIES`).")
    simulated: Distribution = Field(description="The run's simulated users.")
    production: Distribution = Field(description="Production's users.")
    agreement: float | None = Field(
        description="1 - Kolmogorov-Smirnov distance, 0..1; None when left out."
    )
    difference: float | None = Field(description="Simulated mean - production mean.")
    difference_interval: tuple[float, float] | None = Field(
        description="Its 95% bootstrap interval (production sessions, simulated tasks)."
    )
    easy_mode: bool = Field(description="Simulation is easier than production here.")
    note: str = Field(default="", description="Why it is left out, or how it is easy mode.")


class OutcomeRow(BaseModel):
    """One task made from production traces: what production saw and what the run did."""

    task_id: str
    kind: str = Field(description="`success` or `failure`: the production outcome.")
    sessions: int = Field(description="Production sessions the task stands for.")
    simulated_pass: float = Field(description="Share of its graded episodes that passed.")
    graded: int = Field(description="Its graded episodes (errors left out).")


class OutcomeCalibration(BaseModel):
    """The simulated pass rate against production's outcome on the same sessions."""

    tasks: int = Field(description="Tasks made from production with graded episodes.")
    sessions: int = Field(description="Production sessions they stand for.")
    production_success: float = Field(description="Share of those sessions that succeeded.")
    simulated_pass: float = Field(description="The run's pass rate, weighted the same.")
    gap: float = Field(description="simulated_pass - production_success (> 0: optimistic).")
    gap_interval: tuple[float, float] = Field(description="95% bootstrap interval over tasks.")
    rows: list[OutcomeRow] = Field(default_factory=list)


class FidelityReport(BaseModel):
    """`harness fidelity`: a run's simulated users against production's."""

    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(default="", description="The simulated run.")
    source: str = Field(default="", description="The production source.")
    simulated_sessions: int = Field(description="The run's episodes measured.")
    simulated_tasks: int = Field(description="Their tasks (the simulated bootstrap clusters).")
    production_sessions: int = Field(description="Production sessions measured.")
    left_out: int = Field(default=0, description="Episodes left out (harness errors, no turn).")
    index: float | None = Field(description="Fidelity index, 0..100 (None: nothing comparable).")
    interval: tuple[float, float] | None = Field(description="Its 95% bootstrap interval.")
    covers: str = Field(description="What the interval covers.")
    families: dict[str, float | None] = Field(description="Each family's mean agreement.")
    dimensions: list[DimensionAgreement] = Field(description="Every dimension, in order.")
    easy_mode: list[str] = Field(description="The easy-mode dimensions.")
    outcome: OutcomeCalibration | None = Field(
        default=None, description="On tasks made from production traces, when the run has any."
    )


@dataclass
class _Dimension:
    """One dimension's values on both sides, indexed into their pooled distinct values."""

    sim: np.ndarray  # index into `grid` per simulated session, -1 when it has no value
    prod: np.ndarray
    sim_values: np.ndarray  # the values (nan: none)
    prod_values: np.ndarray
    size: int  # len(grid)


def _values(behaviours: Sequence[SessionBehaviour], name: str) -> np.ndarray:
    return np.array(
        [np.nan if (v := getattr(b, name)) is None else float(v) for b in behaviours], dtype=float
    )


def _dimension(sim: np.ndarray, prod: np.ndarray) -> _Dimension:
    known = np.concatenate([sim[~np.isnan(sim)], prod[~np.isnan(prod)]])
    grid = np.unique(known)

    def index(values: np.ndarray) -> np.ndarray:
        found = np.searchsorted(grid, np.nan_to_num(values))
        return np.where(np.isnan(values), -1, found)

    return _Dimension(index(sim), index(prod), sim, prod, len(grid))


def _cdf(index: np.ndarray, weights: np.ndarray, size: int) -> np.ndarray | None:
    held = index >= 0
    total = weights[held].sum()
    if total <= 0:
        return None
    return np.cumsum(np.bincount(index[held], weights=weights[held], minlength=size)) / total


def _mean(values: np.ndarray, weights: np.ndarray) -> float | None:
    held = ~np.isnan(values)
    total = weights[held].sum()
    return float((values[held] * weights[held]).sum() / total) if total > 0 else None


def _agreement(dim: _Dimension, w_sim: np.ndarray, w_prod: np.ndarray) -> float | None:
    a, b = _cdf(dim.sim, w_sim, dim.size), _cdf(dim.prod, w_prod, dim.size)
    return None if a is None or b is None else float(1.0 - np.abs(a - b).max())


def _index(agreements: dict[str, float | None]) -> tuple[float | None, dict[str, float | None]]:
    families: dict[str, float | None] = {}
    for family, names in FAMILIES.items():
        known = [a for n in names if (a := agreements.get(n)) is not None]
        families[family] = float(np.mean(known)) if known else None
    scored = [v for v in families.values() if v is not None]
    return (100.0 * float(np.mean(scored)) if scored else None), families


def _distribution(values: np.ndarray) -> Distribution:
    known = values[~np.isnan(values)]
    if not len(known):
        return Distribution(sessions=0, mean=None, p10=None, median=None, p90=None)
    p10, median, p90 = (float(q) for q in np.quantile(known, [0.1, 0.5, 0.9]))
    return Distribution(
        sessions=len(known), mean=float(known.mean()), p10=p10, median=median, p90=p90
    )


def _percentiles(values: list[float]) -> tuple[float, float] | None:
    """The percentile bootstrap interval of the resampled values (None without any)."""
    if not values:
        return None
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def _basic(estimate: float, values: list[float]) -> tuple[float, float] | None:
    """The basic (reflected) bootstrap interval, within 0..100: a distance between two samples
    is biased up by their noise, and a resample adds the same noise again, so the resampled
    indexes sit below the estimate by about as much as the estimate sits below the truth."""
    found = _percentiles(values)
    if found is None:
        return None
    low, high = found
    return max(0.0, 2 * estimate - high), min(100.0, 2 * estimate - low)


def compare_behaviour(
    simulated: Sequence[SessionBehaviour],
    tasks: Sequence[str],
    production: Sequence[SessionBehaviour],
    bootstrap: int = BOOTSTRAP,
    seed: int = 0,
) -> FidelityReport:
    """Simulated sessions (each with its task, the bootstrap's cluster) against production's
    (see the module's doc)."""
    clusters = {task: n for n, task in enumerate(dict.fromkeys(tasks))}
    task_of = np.array([clusters[t] for t in tasks], dtype=int)
    dims = {n: _dimension(_values(simulated, n), _values(production, n)) for n in DIMENSIONS}
    comparable = {
        n: (d.sim >= 0).sum() >= MIN_VALUES and (d.prod >= 0).sum() >= MIN_VALUES
        for n, d in dims.items()
    }
    ones_sim, ones_prod = np.ones(len(simulated)), np.ones(len(production))
    agreements = {
        n: _agreement(d, ones_sim, ones_prod) if comparable[n] else None for n, d in dims.items()
    }
    index, families = _index(agreements)

    rng = np.random.default_rng(seed)
    indexes: list[float] = []
    differences: dict[str, list[float]] = {n: [] for n in EASIER if comparable[n]}
    if simulated and production:
        for _ in range(bootstrap):
            picked = np.bincount(
                rng.integers(0, len(clusters), len(clusters)), minlength=len(clusters)
            )
            w_sim = picked[task_of].astype(float)
            w_prod = np.bincount(
                rng.integers(0, len(production), len(production)), minlength=len(production)
            ).astype(float)
            drawn = {
                n: _agreement(d, w_sim, w_prod) if comparable[n] else None for n, d in dims.items()
            }
            value, _ = _index(drawn)
            if value is not None:
                indexes.append(value)
            for n in differences:
                a, b = _mean(dims[n].sim_values, w_sim), _mean(dims[n].prod_values, w_prod)
                if a is not None and b is not None:
                    differences[n].append(a - b)

    rows: list[DimensionAgreement] = []
    for name, dim in dims.items():
        sim_side, prod_side = _distribution(dim.sim_values), _distribution(dim.prod_values)
        difference = (
            sim_side.mean - prod_side.mean
            if sim_side.mean is not None and prod_side.mean is not None
            else None
        )
        interval = _percentiles(differences.get(name, []))
        easy, note = False, ""
        if not comparable[name]:
            note = (
                f"left out: {sim_side.sessions} simulated and {prod_side.sessions} production "
                f"sessions have a value (at least {MIN_VALUES} each needed)"
            )
        elif name in EASIER and interval is not None and agreements[name] is not None:
            side = EASIER[name]
            easy = min(side * interval[0], side * interval[1]) > 0 and (
                agreements[name] < EASY_AGREEMENT
            )
            if easy:
                note = f"simulated users {EASY_WORDS[name]} than production's"
        rows.append(
            DimensionAgreement(
                name=name,
                family=FAMILY_OF[name],
                simulated=sim_side,
                production=prod_side,
                agreement=agreements[name],
                difference=difference,
                difference_interval=interval,
                easy_mode=easy,
                note=note,
            )
        )
    return FidelityReport(
        simulated_sessions=len(simulated),
        simulated_tasks=len(clusters),
        production_sessions=len(production),
        index=index,
        interval=_basic(index, indexes) if index is not None else None,
        covers=f"{CONFIDENCE:.0%} basic bootstrap ({bootstrap} resamples) over "
        f"{len(production)} production sessions and {len(clusters)} simulated tasks (each "
        "with all its episodes)",
        families=families,
        dimensions=rows,
        easy_mode=[r.name for r in rows if r.easy_mode],
    )


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
        behaviour = measure(messages, f"{transcript.task_id}#{transcript.trial}")
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
    outcome of the same sessions (see the module's doc); None without such a graded task."""
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
    interval = _percentiles(gaps)
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
    return report

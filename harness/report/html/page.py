"""Everything one report page shows, read from the results store: the runs with every episode,
the A/B comparison when there are two runs that share a task, the gate's decision on them, the
store's trends, and the failure clusters behind the runs' tasks."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.compare import ComparisonResult, GradedEpisodes, compare_episodes
from harness.fidelity import FidelityReport
from harness.gate import GateResult
from harness.report.html.clusters import ClusterView, failure_clusters
from harness.report.html.episodes import EpisodeView, episode_view
from harness.report.html.figures import RunSection, run_section
from harness.report.html.pairs import EpisodePair, episode_pairs
from harness.report.html.tasks import RunTasks, recorded_tasks, run_tasks
from harness.report.html.trends import GateDecision, Trends, trends
from harness.report.summary import run_figures
from harness.store import RunInfo, Store


class ReportPage(BaseModel):
    """One page of runs, as the report file and the viewer's run page show it."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    title: str = Field(description="The page's title.")
    generated_at: str = Field(description="When the page was made (UTC, ISO 8601).")
    store: str = Field(description="The results store it was read from.")
    runs: list[RunSection] = Field(description="The run, then the run it is compared with.")
    comparison: ComparisonResult | None = Field(default=None, description="B - A, two runs.")
    pairs: list[EpisodePair] = Field(default_factory=list, description="A/B episode pairs.")
    unpaired: str = Field(
        default="", description="Why two runs are not compared (they share no task), else empty."
    )
    gate: GateDecision | None = Field(
        default=None, description="The newest gate decision on these runs, when there is one."
    )
    gate_result: GateResult | None = Field(
        default=None,
        description="That decision whole: its rules with their figures and verdicts (None for "
        "a decision stored before the store kept them).",
    )
    trends: Trends | None = Field(default=None, description="The store's trends.")
    clusters: list[ClusterView] = Field(default_factory=list, description="Failure clusters.")
    fidelity: FidelityReport | None = Field(
        default=None, description="The run's newest sim-to-real report (`harness fidelity`)."
    )

    @property
    def decides(self) -> bool:
        """Whether the page opens with a decision: an A/B, its refusal, or a gate's."""
        return self.comparison is not None or bool(self.unpaired) or self.gate is not None


def run_episodes(store: Store, info: RunInfo, tasks: RunTasks, prefix: str) -> list[EpisodeView]:
    """A run's episodes with their newest verdicts, keyed `prefix` + their index."""
    verdicts = {(v.task_id, v.trial): v for v in store.latest_verdicts(info.id)}
    return [
        episode_view(
            f"{prefix}{n}",
            info.id,
            transcript,
            verdicts.get((transcript.task_id, transcript.trial)),
            tasks.cases.get(transcript.task_id),
        )
        for n, (transcript, _, _) in enumerate(store.transcripts(info.id))
    ]


TaskReader = Callable[[RunInfo], RunTasks]
"""How a page reads the tasks of a run stored before the store kept them, from their files
(`run_tasks`; the viewer keeps what it read)."""


def load_run(
    store: Store, run_id: str, prefix: str, read_tasks: TaskReader = run_tasks
) -> tuple[RunSection, RunTasks]:
    """One run's section, and its tasks: as the store recorded them, else read from its
    recorded files."""
    info = store.run(run_id)
    if info is None:
        raise LookupError(f"no run {run_id!r} in {store.path}")
    tasks = recorded_tasks(store, run_id) or read_tasks(info)
    levels = {task_id: case.task.level for task_id, case in tasks.cases.items()}
    figures = run_figures(store, run_id, levels)
    episodes = run_episodes(store, info, tasks, prefix)
    return run_section(store, info, figures, episodes, tasks.problem), tasks


def build_report(
    store: Store, run_id: str, against: str | None = None, read_tasks: TaskReader = run_tasks
) -> ReportPage:
    """The page of a run (A) and, with `against`, of the run B it is compared with: A the
    baseline, B the candidate. When the newest gate on the two judged `run_id` as the candidate,
    the page takes the gate's roles (A and B swapped), so that its title, its A/B and its gate
    all read "candidate against baseline" the same way."""
    history = trends(store)
    gate = gate_on(history.decisions, run_id, against)
    if against is not None and gate is not None and gate.candidate_run == run_id:
        run_id, against = against, run_id
    section, tasks = load_run(store, run_id, "a", read_tasks)
    runs = [section]
    comparison, pairs, unpaired = None, [], ""
    if against is not None:
        other, _ = load_run(store, against, "b", read_tasks)
        runs.append(other)
        if shared_tasks(section, other):
            comparison = compare_episodes(
                GradedEpisodes.load(store, run_id),
                GradedEpisodes.load(store, against),
                list(tasks.cases.values()),
            )
            pairs = episode_pairs(section.episodes, other.episodes, comparison)
        else:
            unpaired = no_shared_task(section, other)
    return ReportPage(
        title=page_title(runs),
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        store=str(store.path),
        runs=runs,
        comparison=comparison,
        pairs=pairs,
        unpaired=unpaired,
        gate=gate,
        gate_result=stored_gate_result(store, gate),
        trends=history,
        clusters=failure_clusters(tasks.cases, section.episodes),
        fidelity=FidelityReport.model_validate_json(kept)
        if (kept := store.fidelity(run_id))
        else None,
    )


def stored_gate_result(store: Store, gate: GateDecision | None) -> GateResult | None:
    """The whole of a gate decision, as the store kept it; None when it kept none (a decision
    stored before version 7) or one this harness no longer reads: the page then shows the
    decision's line without its rules, rather than failing."""
    kept = store.gate_result(gate.candidate_run, gate.baseline_run) if gate else None
    try:
        return GateResult.model_validate_json(kept) if kept else None
    except ValidationError:
        return None


def page_title(runs: list[RunSection]) -> str:
    """'CANDIDATE (run) vs BASELINE (run)', the candidate (B) first as every comparison line
    reads it, each named by its variant and run id; a run alone, 'VARIANT (run)'."""
    named = [f"{s.info.variant} ({s.info.id})" for s in reversed(runs)]
    return " vs ".join(named)


def shared_tasks(a: RunSection, b: RunSection) -> set[str]:
    """The task ids both runs played: an A/B compares only these."""
    return {e.task_id for e in a.episodes} & {e.task_id for e in b.episodes}


def no_shared_task(a: RunSection, b: RunSection) -> str:
    """Why two runs get no A/B, in one sentence: a comparison over no task decides nothing."""
    return (
        f"Runs {a.info.id} ({a.info.variant}) and {b.info.id} ({b.info.variant}) share no task: "
        "there is nothing to compare, so this page has no A/B. Each run is shown on its own."
    )


def gate_on(decisions: list[GateDecision], run_id: str, against: str | None) -> GateDecision | None:
    """The newest gate decision on the page's runs: with two runs, the gate of either as the
    candidate against the other as the baseline; with one, any gate of that run."""
    for decision in reversed(decisions):
        if against is None:
            if decision.candidate_run == run_id:
                return decision
        elif {decision.candidate_run, decision.baseline_run} == {run_id, against}:
            return decision
    return None

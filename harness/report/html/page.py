"""Everything one report page shows, read from the results store: the runs with every episode,
the A/B comparison when there are two runs, the store's trends, and the failure clusters behind
the runs' tasks."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field

from harness.compare import ComparisonResult, GradedEpisodes, compare_episodes
from harness.report.html.clusters import ClusterView, failure_clusters
from harness.report.html.episodes import EpisodeView, episode_view
from harness.report.html.figures import RunSection, run_section
from harness.report.html.pairs import EpisodePair, episode_pairs
from harness.report.html.tasks import RunTasks, run_tasks
from harness.report.html.trends import Trends, trends
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
    trends: Trends | None = Field(default=None, description="The store's trends.")
    clusters: list[ClusterView] = Field(default_factory=list, description="Failure clusters.")


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
"""How a page reads a run's tasks (`run_tasks`; the viewer keeps what it read)."""


def load_run(
    store: Store, run_id: str, prefix: str, read_tasks: TaskReader = run_tasks
) -> tuple[RunSection, RunTasks]:
    """One run's section, and the tasks read from its recorded files."""
    info = store.run(run_id)
    if info is None:
        raise LookupError(f"no run {run_id!r} in {store.path}")
    tasks = read_tasks(info)
    levels = {task_id: case.task.level for task_id, case in tasks.cases.items()}
    figures = run_figures(store, run_id, levels)
    episodes = run_episodes(store, info, tasks, prefix)
    return run_section(store, info, figures, episodes, tasks.problem), tasks


def build_report(
    store: Store, run_id: str, against: str | None = None, read_tasks: TaskReader = run_tasks
) -> ReportPage:
    """The page of a run (A) and, with `against`, of the run B it is compared with."""
    section, tasks = load_run(store, run_id, "a", read_tasks)
    runs = [section]
    comparison, pairs = None, []
    if against is not None:
        other, _ = load_run(store, against, "b", read_tasks)
        runs.append(other)
        comparison = compare_episodes(
            GradedEpisodes.load(store, run_id),
            GradedEpisodes.load(store, against),
            list(tasks.cases.values()),
        )
        pairs = episode_pairs(section.episodes, other.episodes, comparison)
    title = f"Run {run_id}" + (f" against {against}" if against else "")
    return ReportPage(
        title=title,
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        store=str(store.path),
        runs=runs,
        comparison=comparison,
        pairs=pairs,
        trends=trends(store),
        clusters=failure_clusters(tasks.cases, section.episodes),
    )

"""What the viewer's own pages show: the list of runs, and the episodes of every run that a
filter matches. A run's page is the report's."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from harness.gate.suites import same_lineage
from harness.report.html.episodes import EpisodeView
from harness.report.html.filters import Choices, EpisodeFilter
from harness.report.html.page import TaskReader, run_episodes
from harness.report.summary import RunFigures, run_figures
from harness.store import RunInfo, Store

MAX_RESULTS = 500  # episodes a search lists; the rest are counted


class RunLine(BaseModel):
    """A run in the list of runs."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    info: RunInfo = Field(description="The run's header.")
    figures: RunFigures = Field(description="Its pass rate and interval.")
    episodes: int = Field(description="Episodes stored.")
    tasks: set[str] = Field(description="The task ids it played.")
    previous: str | None = Field(
        description="The run before it of the same variant lineage that shares a task with it."
    )


def run_lines(store: Store) -> list[RunLine]:
    """Every run, newest first, each with the run before it of the same variant lineage (one
    extends the other, or both extend one) that played a task it played: the A/B a reader
    most likely wants. Runs that share no task are never paired: their A/B has nothing in it."""
    lines: list[RunLine] = []
    for info in store.runs():
        keys = store.episode_keys(info.id)
        tasks = {task_id for task_id, _ in keys}
        previous = next(
            (e.info.id for e in reversed(lines) if same_lineage(e.info, info) and e.tasks & tasks),
            None,
        )
        lines.append(
            RunLine(
                info=info,
                figures=run_figures(store, info.id),
                episodes=len(keys),
                tasks=tasks,
                previous=previous,
            )
        )
    return lines[::-1]


class SearchResults(BaseModel):
    """The episodes of every run that a filter matches."""

    episodes: list[EpisodeView] = Field(description="The first matches, newest run first.")
    shown: int = Field(description="How many matched.")
    total: int = Field(description="How many episodes the store holds.")
    choices: Choices = Field(description="The values the form offers.")

    @property
    def cut(self) -> bool:
        return self.shown > len(self.episodes)


def search(store: Store, flt: EpisodeFilter, read_tasks: TaskReader) -> SearchResults:
    """Every run's episodes through the filter; at most `MAX_RESULTS` are kept."""
    every: list[EpisodeView] = []
    for n, info in enumerate(reversed(store.runs())):
        every += run_episodes(store, info, read_tasks(info), f"r{n}-")
    matched = [episode for episode in every if flt.matches(episode)]
    return SearchResults(
        episodes=matched[:MAX_RESULTS],
        shown=len(matched),
        total=len(every),
        choices=Choices.of(every),
    )

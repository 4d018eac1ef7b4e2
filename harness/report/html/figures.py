"""The figures of a run's page beyond the terminal summary's (`run_figures`): pass rates per
level and per tag with intervals counting tasks, usage per role, time, end reasons."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from harness.compare import pass_rate
from harness.gate.suites import run_suite, suite_id
from harness.report.html.episodes import EpisodeView
from harness.report.html.filters import Choices
from harness.report.summary import RunFigures
from harness.store import RunInfo, Store
from harness.transcript import Usage


class GroupRate(BaseModel):
    """The pass rate of one group of tasks (a level, a tag), the task as the unit."""

    label: str = Field(description="The group: a level or a tag.")
    tasks: int = Field(description="Tasks in the group with a graded episode.")
    passed: int = Field(description="Episodes that passed.")
    graded: int = Field(description="Episodes graded pass or fail (errors excluded).")
    rate: float = Field(description="Mean of the tasks' pass rates.")
    low: float = Field(description="Lower end of the 95% interval, clustered by task.")
    high: float = Field(description="Upper end of the 95% interval, clustered by task.")


class RoleUsage(BaseModel):
    """Model calls, tokens and cost of one role."""

    role: str = Field(description="agent or user simulator.")
    usage: Usage = Field(description="Summed over the run's episodes.")


class RunSection(BaseModel):
    """One run as its page shows it."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    info: RunInfo = Field(description="The run's header in the store.")
    figures: RunFigures = Field(description="The summary every report format shares.")
    suite: str = Field(description="The suite's short hash (task ids and contents).")
    by_level: list[GroupRate] = Field(description="Pass rate per task level.")
    by_tag: list[GroupRate] = Field(description="Pass rate per task tag.")
    roles: list[RoleUsage] = Field(description="Usage of the agent, simulated user and judges.")
    end_reasons: list[tuple[str, int]] = Field(description="Episodes per end reason.")
    seconds: float = Field(description="Summed wall time of the episodes.")
    wall_s: float | None = Field(description="First start to last end, when recorded.")
    episodes: list[EpisodeView] = Field(description="Every episode, by task and trial.")
    tasks_problem: str = Field(default="", description="Why the task files were not read.")

    @property
    def choices(self) -> Choices:
        return Choices.of(self.episodes)


def group_rates(groups: dict[str, list[EpisodeView]]) -> list[GroupRate]:
    """Each group's pass rate over its graded episodes (errors and ungraded left out)."""
    rates = []
    for label, members in groups.items():
        outcomes: dict[str, list[bool]] = defaultdict(list)
        for e in members:
            if e.outcome in ("pass", "fail"):
                outcomes[e.task_id].append(e.outcome == "pass")
        if not outcomes:
            continue
        rate = pass_rate(outcomes)
        rates.append(
            GroupRate(
                label=label,
                tasks=rate.tasks,
                passed=rate.passed,
                graded=rate.n,
                rate=rate.rate,
                low=rate.low,
                high=rate.high,
            )
        )
    return rates


def _wall_seconds(episodes: list[EpisodeView]) -> float | None:
    """From the first episode's start to the last one's end, when starts were recorded."""
    spans = []
    for episode in episodes:
        if episode.started_at:
            begin = datetime.fromisoformat(episode.started_at)
            spans.append((begin, begin + timedelta(seconds=episode.duration_s)))
    if not spans:
        return None
    return (max(end for _, end in spans) - min(begin for begin, _ in spans)).total_seconds()


def run_section(
    store: Store,
    info: RunInfo,
    figures: RunFigures,
    episodes: list[EpisodeView],
    tasks_problem: str = "",
) -> RunSection:
    """A run's page: the shared summary, then the groups, usage and time of its episodes."""
    by_level: dict[str, list[EpisodeView]] = defaultdict(list)
    by_tag: dict[str, list[EpisodeView]] = defaultdict(list)
    for e in episodes:
        if e.level is not None:
            by_level[str(e.level)].append(e)
        for tag in e.tags:
            by_tag[tag].append(e)
    ends = Counter(e.end_reason for e in episodes)
    return RunSection(
        info=info,
        figures=figures,
        suite=suite_id(run_suite(store, info)),
        by_level=group_rates(dict(sorted(by_level.items()))),
        by_tag=group_rates(dict(sorted(by_tag.items()))),
        roles=[
            RoleUsage(role="agent", usage=figures.usage),
            RoleUsage(role="user simulator", usage=figures.user_usage),
            RoleUsage(role="judge", usage=figures.judge_usage),
        ],
        end_reasons=ends.most_common(),
        seconds=sum(e.duration_s for e in episodes),
        wall_s=_wall_seconds(episodes),
        episodes=episodes,
        tasks_problem=tasks_problem,
    )

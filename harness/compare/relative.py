"""Comparing two stored runs, and the relative judge: which transcript of each (task, trial)
pair is better, as B's win rate over A clustered by task."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from harness import defaults
from harness.compare.episodes import GradedEpisodes
from harness.compare.paired import compare_episodes
from harness.compare.results import ComparisonResult, RelativeJudgement
from harness.grading.relative import compare_pair
from harness.models import ChatModel
from harness.stats import run_rate
from harness.store import PlayedTask, Store
from harness.store.tasks import full_task
from harness.transcript import Usage

# B's score in one judged pair: a tie counts half a win, so 0.5 means "no better" (chess scoring)
WIN_SCORES = {"b": 1.0, "tie": 0.5, "a": 0.0}


async def judge_pairs(
    store: Store,
    a: GradedEpisodes,
    b: GradedEpisodes,
    cases: Sequence[PlayedTask],
    judge: ChatModel,
) -> RelativeJudgement:
    """The relative judge over every (task, trial) both sides played: win rate of B over A."""
    tasks = {case.task.id: full_task(case) for case in cases}
    a_transcripts = {(t.task_id, t.trial): t for t, _, _ in store.transcripts(a.run_id)}
    scores: dict[str, list[float]] = defaultdict(list)
    failures, usage = 0, Usage()
    for transcript, _, _ in store.transcripts(b.run_id):
        key = (transcript.task_id, transcript.trial)
        if key not in a_transcripts or transcript.task_id not in tasks:
            continue
        verdict = await compare_pair(
            tasks[transcript.task_id], a_transcripts[key], transcript, judge
        )
        usage.add(verdict.usage)
        if verdict.winner is None:
            failures += 1
        else:
            scores[transcript.task_id].append(WIN_SCORES[verdict.winner])
    flat = [s for trials in scores.values() for s in trials]
    rate = run_rate(scores)
    return RelativeJudgement(
        b_wins=flat.count(1.0),
        a_wins=flat.count(0.0),
        ties=flat.count(0.5),
        judge_errors=failures,
        win_rate=rate.estimate if flat else 0.5,
        low=rate.low,
        high=rate.high,
        tasks=rate.tasks,
        usage=usage,
    )


async def compare_runs(
    store: Store,
    run_a: str,
    run_b: str,
    cases: Sequence[PlayedTask],
    judge: ChatModel | None = None,
    max_error_rate: float = defaults.MAX_ERROR_RATE,
    only: set[str] | None = None,
) -> ComparisonResult:
    """Compare two stored runs; with a judge, also ask it which transcript of each pair is
    better. The one comparison of stored runs, for the `compare` node and command alike.
    `only`: the task ids to compare on (the tasks two suites share), else every task."""
    a, b = GradedEpisodes.load(store, run_a), GradedEpisodes.load(store, run_b)
    if only is not None:
        a, b = a.only_tasks(only), b.only_tasks(only)
        cases = [case for case in cases if case.task.id in only]
    result = compare_episodes(a, b, cases, max_error_rate=max_error_rate)
    if judge is not None:
        result.relative = await judge_pairs(store, a, b, cases, judge)
    return result

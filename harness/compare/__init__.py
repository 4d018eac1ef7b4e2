"""Variant B against variant A on the same tasks, personas and seeds, without being fooled by
noise: the task is the unit of every interval and test (repeating trials adds no tasks), with
pass^k, breakdowns, deltas, and the tasks that flipped.

`episodes` loads a run's graded episodes, `results` holds the result models, `paired` makes the
comparison and its verdict, `relative` compares stored runs and asks the relative judge.
"""

from harness.compare.episodes import GradedEpisodes, Key
from harness.compare.paired import (
    PASS_HAT_KS,
    compare_episodes,
    decide,
    error_bounds,
    paired_keys,
    pass_hat_ks,
    pass_rate,
    side_errors,
    task_difference,
    verdict_of,
)
from harness.compare.relative import WIN_SCORES, compare_runs, judge_pairs
from harness.compare.results import (
    ComparisonResult,
    ErrorBounds,
    PairedTest,
    PassHatK,
    PassRate,
    PassRates,
    RelativeJudgement,
    RunPassRate,
    SideErrors,
    Spend,
    Spends,
    TaskDifference,
    Verdict,
)

__all__ = [
    "PASS_HAT_KS",
    "WIN_SCORES",
    "ComparisonResult",
    "ErrorBounds",
    "GradedEpisodes",
    "Key",
    "PairedTest",
    "PassHatK",
    "PassRate",
    "PassRates",
    "RelativeJudgement",
    "RunPassRate",
    "SideErrors",
    "Spend",
    "Spends",
    "TaskDifference",
    "Verdict",
    "compare_episodes",
    "compare_runs",
    "decide",
    "error_bounds",
    "judge_pairs",
    "paired_keys",
    "pass_hat_ks",
    "pass_rate",
    "side_errors",
    "task_difference",
    "verdict_of",
]

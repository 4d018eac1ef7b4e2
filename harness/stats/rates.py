"""Rates of one suite and their intervals: Wilson, pass@k and pass^k, the bootstrap over tasks,
win rates. The conventions are in `harness.stats`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from math import comb, sqrt
from statistics import NormalDist
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

Outcomes = Mapping[str, Sequence[bool | float]]


@dataclass(frozen=True, slots=True)
class Interval:
    """A point estimate with its interval, so that no rate is printed without its uncertainty."""

    estimate: float
    low: float
    high: float


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion; (0, 1) when there is no data."""
    if n == 0:
        return 0.0, 1.0
    interval = _wilson(successes / n, n, confidence)
    low = 0.0 if successes == 0 else interval.low  # exact at the edges
    high = 1.0 if successes == n else interval.high
    return low, high


def _check_counts(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c} successes of n={n} trials")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k} with n={n} trials")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased chance that at least one of k trials passes, from c passes in n (Chen et al. 2021).

    Exact in integers (Python's comb), so large n needs no numerically stable product form.
    """
    _check_counts(n, c, k)
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased chance that all of k trials pass, from c passes in n (tau-bench's pass^k).

    pass^k falls as k grows for an agent that is not reliable, which pass@k hides.
    """
    _check_counts(n, c, k)
    return comb(c, k) / comb(n, k)


def _suite_mean(
    outcomes: Mapping[str, Sequence[bool]], k: int, estimator: Callable[[int, int, int], float]
) -> float:
    if not outcomes:
        return 0.0
    short = [task for task, trials in outcomes.items() if len(trials) < k]
    if short:
        raise ValueError(f"tasks with fewer than k={k} trials: {', '.join(short)}")
    rates = [estimator(len(trials), sum(map(bool, trials)), k) for trials in outcomes.values()]
    return sum(rates) / len(rates)


def suite_pass_hat_k(outcomes: Mapping[str, Sequence[bool]], k: int) -> float:
    """pass^k averaged over tasks (task id -> trial outcomes); 0.0 for an empty suite.

    A task with fewer than k trials is a ValueError naming it: its pass^k is undefined.
    """
    return _suite_mean(outcomes, k, pass_hat_k)


def suite_pass_at_k(outcomes: Mapping[str, Sequence[bool]], k: int) -> float:
    """pass@k averaged over tasks (task id -> trial outcomes); 0.0 for an empty suite.

    A task with fewer than k trials is a ValueError naming it: its pass@k is undefined.
    """
    return _suite_mean(outcomes, k, pass_at_k)


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")


def _task_means(outcomes: Outcomes) -> np.ndarray:
    """Each task's mean over its trials; a task without trials has no rate, so it is an error."""
    import numpy as np

    empty = [task for task, trials in outcomes.items() if not trials]
    if empty:
        raise ValueError(f"tasks with no trials: {', '.join(empty)}")
    return np.array([sum(map(float, trials)) / len(trials) for trials in outcomes.values()])


def _bootstrap_mean(
    values: np.ndarray, confidence: float, resamples: int, seed: int
) -> tuple[float, float, np.ndarray]:
    """Percentile bootstrap of the mean of two or more values: (low, high, resampled means).

    Percentile rather than BCa: BCa's acceleration is undefined when all values are equal (every
    task passes, say) and scipy then gives NaN, while percentile gives the degenerate interval.
    Resampling in batches of 1000 bounds memory for large suites and does not change the result.
    """
    import numpy as np
    from scipy.stats import bootstrap

    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    result = bootstrap(
        (values,),
        np.mean,
        n_resamples=resamples,
        batch=1000,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        rng=seed,
    )
    interval = result.confidence_interval
    return float(interval.low), float(interval.high), result.bootstrap_distribution


def bootstrap_interval(
    outcomes: Outcomes, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> Interval:
    """Pass rate (mean of per-task means) with a percentile bootstrap interval over tasks.

    Empty suite: (0, 0, 1), like `wilson_interval`. When every task has the same rate (all pass,
    say), or there is a single task, the interval is degenerate at the estimate: the bootstrap sees
    no task-to-task variation, which is not certainty, so show `wilson_interval` there if needed.
    With few tasks percentile intervals are somewhat too narrow (by about sqrt((n-1)/n)).
    """
    _check_confidence(confidence)
    if not outcomes:
        return Interval(0.0, 0.0, 1.0)
    means = _task_means(outcomes)
    estimate = float(means.mean())
    if len(means) < 2:
        return Interval(estimate, estimate, estimate)
    low, high, _ = _bootstrap_mean(means, confidence, resamples, seed)
    return Interval(estimate, low, high)


def win_rate(wins: int, losses: int, ties: int, confidence: float = 0.95) -> Interval:
    """Relative-judge win rate of b over a, a tie counting as half a win, with a Wilson interval.

    Half a win makes 0.5 mean "no better" whatever the tie rate, as in chess scoring. The Wilson
    interval is on (wins + ties/2) over n; it treats each comparison as a coin flip, whose variance
    is the largest a [0, 1] score can have, so with ties it is a little wide, never too narrow.
    binomtest needs whole successes, hence the closed form. No comparisons: (0.5, 0, 1).
    """
    if min(wins, losses, ties) < 0:
        raise ValueError(f"counts must be non-negative, got {wins=}, {losses=}, {ties=}")
    _check_confidence(confidence)
    n = wins + losses + ties
    if n == 0:
        return Interval(0.5, 0.0, 1.0)
    return _wilson((wins + ties / 2) / n, n, confidence)


def _wilson(rate: float, n: int, confidence: float) -> Interval:
    """Wilson score interval in closed form (Wilson 1927, as scipy's `binomtest(...)
    .proportion_ci(method="wilson")` computes it, without importing scipy), for a rate that need
    not be a whole count over n."""
    z2 = NormalDist().inv_cdf(0.5 + confidence / 2) ** 2
    center = (rate + z2 / (2 * n)) / (1 + z2 / n)
    half_width = sqrt(z2 * rate * (1 - rate) / n + z2 * z2 / (4 * n * n)) / (1 + z2 / n)
    return Interval(rate, max(0.0, center - half_width), min(1.0, center + half_width))


def task_wilson_interval(outcomes: Outcomes, confidence: float = 0.95) -> Interval:
    """Mean of the per-task rates with a Wilson interval that counts tasks, not trials.

    A task's rate lies in [0, 1], so its variance across tasks is at most p(1 - p): the interval
    is exact for a deterministic agent (every trial of a task alike) and a little wide otherwise,
    never too narrow however many trials were repeated. No tasks: (0, 0, 1).
    """
    _check_confidence(confidence)
    if not outcomes:
        return Interval(0.0, 0.0, 1.0)
    means = _task_means(outcomes)
    return _wilson(float(means.mean()), len(means), confidence)

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

    return np.array(_rates(outcomes))


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


def _wilson(rate: float, n: float, confidence: float) -> Interval:
    """Wilson score interval in closed form (Wilson 1927, as scipy's `binomtest(...)
    .proportion_ci(method="wilson")` computes it, without importing scipy), for a rate that need
    not be a whole count over n."""
    return _score_interval(rate, n, NormalDist().inv_cdf(0.5 + confidence / 2))


@dataclass(frozen=True, slots=True)
class RunRate:
    """A run's pass rate and its interval over tasks: what every printer of a run shows.

    The rate is the mean of the per-task rates (each task weighs the same, whatever its trials);
    the interval covers the rate of the population the tasks were drawn from."""

    estimate: float
    low: float
    high: float
    tasks: int
    episodes: int
    passed: float  # sum of the trial outcomes (passes; scores for win rates)
    effective_n: float  # independent episodes the interval is worth (tasks <= this <= episodes)
    method: str  # how the interval was computed, in words a report can print

    @property
    def interval(self) -> Interval:
        return Interval(self.estimate, self.low, self.high)


WILSON_OVER_TASKS = "Wilson over tasks"
CLUSTERED = "Wilson at the task-clustered effective size, Student t"


def run_rate(outcomes: Outcomes, confidence: float = 0.95) -> RunRate:
    """The one pass rate of a run: the mean of per-task rates, with an interval clustered by
    task (the trials of one task are correlated; counting them as independent episodes covers
    the truth 63-74% of the time at 20-50 tasks x 4-8 trials).

    When every task's trials agree (one trial per task, or a deterministic agent), tasks are
    Bernoulli draws and the interval is Wilson's over tasks. Otherwise it is the score (Wilson)
    interval at the effective sample size p(1 - p) / SE^2, where SE is the cluster-robust
    standard error of the mean of task rates (Kish's design effect), kept between the number of
    tasks and of episodes, with Student's t on tasks - 1 degrees of freedom for the estimated
    variance (Korn and Graubard 1998). `bench/gate_power.py` measures its coverage.
    Outcomes may be scores in [0, 1] (a win counting 1 and a tie 0.5). No tasks: (0, 0, 1).
    """
    _check_confidence(confidence)
    means = _rates(outcomes)
    episodes = sum(len(trials) for trials in outcomes.values())
    passed = sum(float(o) for trials in outcomes.values() for o in trials)
    if not means:
        return RunRate(0.0, 0.0, 1.0, 0, 0, 0.0, 0.0, WILSON_OVER_TASKS)
    n, rate = len(means), sum(means) / len(means)
    if all(m in (0.0, 1.0) for m in means):
        found = _wilson(rate, n, confidence)
        low = 0.0 if rate == 0 else found.low  # exact at the edges, like `wilson_interval`
        high = 1.0 if rate == 1 else found.high
        return RunRate(rate, low, high, n, episodes, passed, float(n), WILSON_OVER_TASKS)
    effective = _effective_size(means, rate, episodes)
    critical = _t_quantile(0.5 + confidence / 2, n - 1)
    found = _score_interval(rate, effective, critical)
    return RunRate(rate, found.low, found.high, n, episodes, passed, effective, CLUSTERED)


def rate_below(outcomes: Outcomes, floor: float) -> float:
    """One-sided p-value that the population's rate is below `floor`, by the test `run_rate`'s
    interval inverts: an exact binomial tail over tasks when every task's trials agree, else the
    score statistic at the effective size against Student's t. 1.0 without tasks."""
    means = _rates(outcomes)
    if not means or floor <= 0:
        return 1.0
    n, rate = len(means), sum(means) / len(means)
    if floor >= 1:
        return 1.0 if rate >= 1 else 0.0
    if all(m in (0.0, 1.0) for m in means):
        return binomial_cdf(round(rate * n), n, floor)
    from scipy.special import stdtr

    effective = _effective_size(means, rate, sum(len(t) for t in outcomes.values()))
    statistic = (rate - floor) / sqrt(floor * (1 - floor) / effective)
    return float(stdtr(n - 1, statistic))


def binomial_cdf(successes: int, n: int, p: float) -> float:
    """P(X <= successes) for X ~ Binomial(n, p), exact in integers and floats."""
    return min(1.0, sum(comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(successes + 1)))


def _rates(outcomes: Outcomes) -> list[float]:
    empty = [task for task, trials in outcomes.items() if not trials]
    if empty:
        raise ValueError(f"tasks with no trials: {', '.join(empty)}")
    return [sum(map(float, trials)) / len(trials) for trials in outcomes.values()]


def _effective_size(means: list[float], rate: float, episodes: int) -> float:
    """p(1 - p) / SE^2 with SE the cluster-robust standard error, between tasks and episodes:
    a task's rate varies at most p(1 - p) across tasks, so tasks are a floor."""
    n = len(means)
    variance = sum((m - rate) ** 2 for m in means) / (n - 1) / n if n > 1 else 0.0
    if variance <= 0:
        return float(episodes)
    return min(float(episodes), max(float(n), rate * (1 - rate) / variance))


def _t_quantile(q: float, df: int) -> float:
    """Student's t quantile (scipy imported here: only runs with varied trials need it)."""
    if df < 1:
        return float("inf")
    from scipy.special import stdtrit

    return float(stdtrit(df, q))


def _score_interval(rate: float, n: float, critical: float) -> Interval:
    """The score interval {p : |rate - p| <= critical * sqrt(p(1 - p) / n)}: Wilson's, with
    any critical value (a t quantile where the variance was estimated)."""
    if critical == float("inf"):
        return Interval(rate, 0.0, 1.0)
    c2 = critical * critical
    center = (rate + c2 / (2 * n)) / (1 + c2 / n)
    half_width = sqrt(c2 * rate * (1 - rate) / n + c2 * c2 / (4 * n * n)) / (1 + c2 / n)
    return Interval(rate, max(0.0, center - half_width), min(1.0, center + half_width))

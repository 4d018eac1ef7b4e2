"""Rates of one suite and their intervals: Wilson, pass@k and pass^k, the bootstrap over tasks,
win rates. The conventions are in `harness.stats`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from math import comb, exp, log, log1p, sqrt
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
    effective_n: float  # independent episodes the clustered interval is worth (tasks to episodes)
    method: str  # how the interval was computed, in words a report can print

    @property
    def interval(self) -> Interval:
        return Interval(self.estimate, self.low, self.high)


EXACT_OVER_TASKS = "Clopper-Pearson over tasks"
CLUSTERED = "score interval at the task-clustered effective size, Student t"
WIDENED = CLUSTERED + "; widened to the share of tasks a sample of this size can miss"


def run_rate(outcomes: Outcomes, confidence: float = 0.95) -> RunRate:
    """The one pass rate of a run: the mean of per-task rates, with an interval clustered by
    task (the trials of one task are correlated; counting them as independent episodes covers
    the truth 63-74% of the time at 20-50 tasks x 4-8 trials).

    When every task's trials agree (one trial per task, or a deterministic agent), tasks are
    Bernoulli draws and the interval is Clopper-Pearson's over tasks: the exact inverse of the
    binomial test `rate_below` makes. Otherwise it is the score (Wilson) interval at the
    effective sample size p(1 - p) / SE^2, where SE is the cluster-robust standard error of the
    mean of task rates (Kish's design effect), kept between the number of tasks and of episodes,
    with Student's t on tasks - 1 degrees of freedom for the estimated variance (Korn and
    Graubard 1998); and never narrower than `missed_share_interval`: the observed spread of n
    tasks says nothing of tasks the sample missed, and a sample of n tasks misses a share of
    up to 1 - 0.025^(1/n) of the population entirely (17% of 20 tasks, 3.6% of 100). Where most
    tasks pass nearly always and a few weaker ones carry the failures, the spread alone covers
    the truth in as few as 73% of runs at 20-30 tasks x 8-16 trials; with the missed share,
    `bench/interval_coverage.py` measures 94-100% over 6-100 tasks x 1-16 trials, rare failures
    included. Outcomes may be scores in [0, 1] (a win counting 1 and a tie 0.5).
    No tasks: (0, 0, 1).
    """
    _check_confidence(confidence)
    sums = _sums(outcomes)
    means = [total / len(trials) for total, trials in zip(sums, outcomes.values(), strict=True)]
    episodes, passed = sum(len(trials) for trials in outcomes.values()), sum(sums)
    if not means:
        return RunRate(0.0, 0.0, 1.0, 0, 0, 0.0, 0.0, EXACT_OVER_TASKS)
    n, rate = len(means), sum(means) / len(means)
    if all(m in (0.0, 1.0) for m in means):
        low, high = clopper_pearson(round(rate * n), n, confidence)
        return RunRate(rate, low, high, n, episodes, passed, float(n), EXACT_OVER_TASKS)
    effective = _effective_size(means, rate, episodes)
    found = _score_interval(rate, effective, _t_quantile(0.5 + confidence / 2, n - 1))
    low, high = missed_share_interval(rate, n, confidence)
    method = CLUSTERED if found.low <= low and found.high >= high else WIDENED
    return RunRate(
        rate, min(found.low, low), max(found.high, high), n, episodes, passed, effective, method
    )


def rate_below(outcomes: Outcomes, floor: float) -> float:
    """One-sided p-value that the population's rate is below `floor`, by the test `run_rate`'s
    interval inverts (the floor is above the upper end of the interval at confidence 1 - 2p
    exactly when this is below p): an exact binomial tail over tasks when every task's trials
    agree; else the larger of the score statistic at the effective size against Student's t
    and `missed_share_p`, the chance that n tasks miss every task of the share that would have
    to pass every trial for the rate to reach the floor: so never below the binomial tail of no
    task passing, (1 - floor)^n, and 1.0 for a floor at or below the rate (the interval holds
    the rate at every confidence). 1.0 without tasks."""
    means = _rates(outcomes)
    if not means or floor <= 0:
        return 1.0
    n, rate = len(means), sum(means) / len(means)
    if floor >= 1:
        return 1.0 if rate >= 1 else 0.0
    if all(m in (0.0, 1.0) for m in means):
        return binomial_cdf(round(rate * n), n, floor)
    if n < 2:
        return 1.0  # one task: its interval is (0, 1) at every confidence
    from scipy.special import stdtr

    effective = _effective_size(means, rate, sum(len(t) for t in outcomes.values()))
    statistic = (rate - floor) / sqrt(floor * (1 - floor) / effective)
    return max(float(stdtr(n - 1, statistic)), missed_share_p(rate, n, floor))


def missed_share_interval(
    mean: float, n: int, confidence: float = 0.95, low: float = 0.0, high: float = 1.0
) -> tuple[float, float]:
    """The means a population of values in [low, high] can have when a sample of n of them
    averages `mean` and the sample may have missed a share of the population entirely: a share
    w goes unseen by n draws with chance (1 - w)^n, which is at least (1 - confidence) / 2 up to
    w = 1 - ((1 - confidence) / 2)^(1/n) (about 3.7/n: the rule of three), and the missed share
    could sit at either end. The spread of the values seen cannot show it: 20 tasks that all pass
    nearly always leave open that 17% of the population fails every trial. For 0/1 values it is
    never wider than Clopper-Pearson's interval. No values: (low, high)."""
    if n < 1:
        return low, high
    kept = ((1 - confidence) / 2) ** (1 / n)
    return low + (mean - low) * kept, high - (high - mean) * kept


def missed_share_p(mean: float, n: int, value: float, high: float = 1.0) -> float:
    """One-sided p-value that a population of values at most `high`, of which n draws average
    `mean`, has a mean of `value` or more: the chance (1 - w)^n that the n draws missed the
    whole share w at `high` that would lift the mean to `value`. The exact inverse of the upper
    end of `missed_share_interval`; 1.0 for a value at or below the mean (or no draws), 0.0 at
    or beyond `high`."""
    if n < 1 or value <= mean:
        return 1.0
    if value >= high:
        return 0.0
    return float(((high - value) / (high - mean)) ** n)


def clopper_pearson(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson's exact interval of a binomial proportion: the upper end is the
    proportion whose binomial tail P(X <= successes) (`binomial_cdf`) is (1 - confidence) / 2,
    the lower end the one whose P(X >= successes) is; solved on `binomial_cdf` itself (to
    about 1e-12), so that it is the inverse of that test, and without importing scipy.
    (0, 1) when there is no data."""
    _check_confidence(confidence)
    if n == 0:
        return 0.0, 1.0
    tail = (1 - confidence) / 2
    low = 0.0 if successes == 0 else _solve_cdf(successes - 1, n, 1 - tail)
    high = 1.0 if successes == n else _solve_cdf(successes, n, tail)
    return low, high


def binomial_cdf(successes: int, n: int, p: float) -> float:
    """P(X <= successes) for X ~ Binomial(n, p), summed in logs so that thousands of tasks
    neither overflow nor underflow."""
    if successes < 0:
        return 0.0
    if successes >= n or p <= 0:
        return 1.0
    if p >= 1:
        return 0.0
    return _cdf_from_logs(_log_combs(successes, n), n, p)


def _log_combs(successes: int, n: int) -> list[float]:
    """log C(n, k) for k = 0 to successes, each from the one before."""
    found = [0.0]
    for k in range(successes):
        found.append(found[-1] + log((n - k) / (k + 1)))
    return found


def _cdf_from_logs(log_combs: list[float], n: int, p: float) -> float:
    log_p, log_q = log(p), log1p(-p)
    terms = [c + k * log_p + (n - k) * log_q for k, c in enumerate(log_combs)]
    top = max(terms)
    return min(1.0, exp(top) * sum(exp(t - top) for t in terms))


def _solve_cdf(successes: int, n: int, target: float) -> float:
    """The p in (0, 1) where P(X <= successes) = target, 0 <= successes < n: Newton's method on
    dP/dp = -n C(n - 1, successes) p^successes (1 - p)^(n - 1 - successes), falling back to
    bisection of the bracket it keeps (P falls as p grows)."""
    log_combs, low, high = _log_combs(successes, n), 0.0, 1.0
    log_slope = log(n) + log(comb(n - 1, successes))
    p = (successes + 1) / (n + 2)
    for _ in range(200):
        error = _cdf_from_logs(log_combs, n, p) - target
        if error > 0:
            low = p
        else:
            high = p
        if abs(error) <= 1e-14 * target or high - low <= 1e-16:
            break
        slope = exp(log_slope + successes * log(p) + (n - 1 - successes) * log1p(-p))
        step = p + error / slope if slope > 0 else -1.0
        p = step if low < step < high else (low + high) / 2
    return p


def _sums(outcomes: Outcomes) -> list[float]:
    """Each task's sum of trial outcomes; a task without trials has no rate, so it is an
    error."""
    empty = [task for task, trials in outcomes.items() if not trials]
    if empty:
        raise ValueError(f"tasks with no trials: {', '.join(empty)}")
    return [sum(map(float, trials)) for trials in outcomes.values()]


def _rates(outcomes: Outcomes) -> list[float]:
    sums = _sums(outcomes)
    return [total / len(trials) for total, trials in zip(sums, outcomes.values(), strict=True)]


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

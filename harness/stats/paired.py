"""Two variants on the same tasks: the exact McNemar test over (task, trial) pairs (printed,
deciding nothing), the paired bootstrap, and the task-clustered inference every decision rests
on. The conventions are in `harness.stats`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import gcd, sqrt
from typing import TYPE_CHECKING

from harness.stats.family import at_most
from harness.stats.rates import (
    Outcomes,
    _bootstrap_mean,
    _check_confidence,
    _score_interval,
    _t_quantile,
    _task_means,
    missed_share_interval,
)

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True, slots=True)
class McNemar:
    """The discordant counts behind an exact McNemar p-value, so a report can show both."""

    b_only: int
    a_only: int
    p_value: float


@dataclass(frozen=True, slots=True)
class PairedDifference:
    """Pass rate of b minus pass rate of a on the same tasks, with interval and p-value."""

    difference: float
    low: float
    high: float
    p_value: float


def mcnemar_exact(a: Sequence[bool], b: Sequence[bool], alternative: str = "two-sided") -> McNemar:
    """Exact McNemar test of two variants on the same items (a[i] and b[i] are one task/trial).

    Only discordant pairs carry evidence; the p-value is the binomial test of b_only out of the
    discordant pairs at 1/2: two-sided, or with `alternative="less"` one-sided for "b is worse
    than a" (what a regression gate asks). No discordant pairs (or no pairs) gives p = 1.
    """
    if len(a) != len(b):
        raise ValueError(f"paired outcomes differ in length: {len(a)} in a, {len(b)} in b")
    pairs = list(zip(a, b, strict=True))
    b_only = sum(1 for x, y in pairs if y and not x)
    a_only = sum(1 for x, y in pairs if x and not y)
    if b_only + a_only == 0:
        return McNemar(0, 0, 1.0)
    from scipy.stats import binomtest

    test = binomtest(b_only, b_only + a_only, alternative=alternative)
    return McNemar(b_only, a_only, float(test.pvalue))


def task_differences(a: Outcomes, b: Outcomes) -> np.ndarray:
    """Each task's rate in b minus its rate in a, tasks as a lists them. Both sides must have the
    same tasks (a ValueError names the others)."""
    if a.keys() != b.keys():
        only_a = ", ".join(task for task in a if task not in b) or "none"
        only_b = ", ".join(task for task in b if task not in a) or "none"
        raise ValueError(f"task sets differ: only in a: {only_a}; only in b: {only_b}")
    return _task_means({task: b[task] for task in a}) - _task_means(a)


def paired_bootstrap(
    a: Outcomes,
    b: Outcomes,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
) -> PairedDifference:
    """Pass rate of b minus a on the same tasks, resampling tasks (with all their trials).

    The p-value for "no difference" is two-sided, (1 + #resampled differences <= 0) and >= 0
    each over (resamples + 1), the smaller doubled and capped at 1; so it is never 0 (its floor is
    2 / (resamples + 1)) and it is below 1 - confidence about when the interval excludes 0.
    Both sides must have the same tasks (a ValueError names the others). No tasks: (0, -1, 1, 1).
    One task: degenerate interval and p = 1, since one task cannot show a systematic difference.
    With few tasks the bootstrap p-value is too small; decide with `sign_flip_test` instead.
    """
    _check_confidence(confidence)
    if not a and not b:
        return PairedDifference(0.0, -1.0, 1.0, 1.0)
    differences = task_differences(a, b)
    difference = float(differences.mean())
    if len(differences) < 2:
        return PairedDifference(difference, difference, difference, 1.0)
    low, high, resampled = _bootstrap_mean(differences, confidence, resamples, seed)
    below = int((resampled <= 0).sum()) + 1
    above = int((resampled >= 0).sum()) + 1
    p_value = min(1.0, 2 * min(below, above) / (len(resampled) + 1))
    return PairedDifference(difference, low, high, p_value)


# Task-clustered paired inference: what every decision between two variants rests on.

EXACT_LIMIT = 2_000_000  # largest lattice (tasks x distinct sums) enumerated exactly


@dataclass(frozen=True, slots=True)
class SignFlip:
    """Sign-flip permutation p-values of a mean paired difference over tasks."""

    p_value: float  # two-sided: no difference
    p_less: float  # one-sided: b is worse than a
    p_greater: float  # one-sided: b is better than a
    exact: bool  # every sign pattern counted (else random patterns)


CLUSTERED_SPREAD = "score interval at the task-clustered effective size over the tasks' range"
MISSED_SHARE = "the share of tasks a sample of this size can miss"
WIDENED_SPREAD = f"{CLUSTERED_SPREAD}; widened to {MISSED_SHARE}"


@dataclass(frozen=True, slots=True)
class ClusteredDifference:
    """b minus a with the task as the unit: the mean of per-task rate differences, its
    cluster-robust standard error, an interval over tasks (`difference_interval`) and
    sign-flip p-values."""

    tasks: int
    difference: float
    se: float
    low: float
    high: float
    test: SignFlip
    better: int  # tasks whose rate is higher in b
    worse: int  # tasks whose rate is lower in b
    method: str = MISSED_SHARE  # which bound made the interval, in words a report can print


def lattice_scale(outcomes: Iterable[Sequence[bool | float]]) -> int:
    """The common denominator of per-task rates: the lcm of the trial counts."""
    scale = 1
    for trials in outcomes:
        scale = scale * len(trials) // gcd(scale, len(trials))
    return scale


def sign_flip_test(
    differences: np.ndarray, scale: int = 1, resamples: int = 20_000, seed: int = 0
) -> SignFlip:
    """Paired permutation test over tasks: under "no difference" each task's difference is as
    likely to have either sign, so the observed sum is compared with the sums of every sign
    pattern. Tasks without a difference carry no evidence and are left out.

    Exact when the differences are multiples of 1/`scale` (rates of `scale`-divisible trial
    counts: pass `lattice_scale`), counting sign patterns by their sums (linear in tasks);
    otherwise `resamples` random patterns, p = (1 + count) / (resamples + 1). Never below the
    exact floor 2^-m for m differing tasks, so few tasks can never look significant.
    """
    import numpy as np

    d = differences[np.abs(differences) > 1e-12]
    if len(d) == 0:
        return SignFlip(1.0, 1.0, 1.0, True)
    units = np.round(np.abs(d) * scale).astype(np.int64)
    total = int(units.sum())
    if np.allclose(np.abs(d) * scale, units, atol=1e-9) and len(d) * total <= EXACT_LIMIT:
        dist = np.zeros(2 * total + 1)
        dist[total] = 1.0
        for u in units:
            moved = np.zeros_like(dist)
            moved[u:] += dist[:-u]
            moved[:-u] += dist[u:]
            dist = moved / 2
        observed = int(np.round((np.sign(d) * units).sum()))
        sums = np.arange(-total, total + 1)
        return SignFlip(
            min(1.0, float(dist[np.abs(sums) >= abs(observed)].sum())),
            min(1.0, float(dist[sums <= observed].sum())),
            min(1.0, float(dist[sums >= observed].sum())),
            True,
        )
    rng = np.random.default_rng(seed)
    observed_sum, size, tol = float(d.sum()), np.abs(d), 1e-9 * float(np.abs(d).sum())
    less = greater = both = 0
    for start in range(0, resamples, 1000):
        signs = rng.choice((-1.0, 1.0), size=(min(1000, resamples - start), len(d)))
        sums = signs @ size
        less += int((sums <= observed_sum + tol).sum())
        greater += int((sums >= observed_sum - tol).sum())
        both += int((np.abs(sums) >= abs(observed_sum) - tol).sum())
    p_value, p_less, p_greater = ((1 + n) / (resamples + 1) for n in (both, less, greater))
    return SignFlip(p_value, p_less, p_greater, False)


def difference_interval(
    differences: np.ndarray, confidence: float = 0.95
) -> tuple[float, float, str]:
    """The interval of the population's mean of per-task differences (each in [-1, 1]) from a
    sample of tasks: (low, high, method), the union of two intervals.

    The spread of the tasks seen: the score (Wilson) interval on the range the differences
    span, at the effective size n / D, with D = s^2 / ((mean - min)(max - mean)) the variance
    of the differences over the largest variance values on that range can have at that mean
    (kept at most 1: never fewer than n tasks), and Student's t on tasks - 1 degrees of
    freedom. Where every task either kept its rate or broke completely (the differences two
    values, 0 and -1) it is Wilson's interval over tasks, which the lopsided spread of a few
    breaks needs; where the differences spread, about the t interval.
    The tasks not seen: `missed_share_interval` over [-1, 1]. A sample of n tasks misses a
    share of up to 1 - 0.025^(1/n) of the population entirely (46% of 6 tasks, 17% of 20),
    which could all have broken: 6 tasks none of which changed give -46% to +46%, never a
    zero-width interval. The method says whether the missed share widened the interval.
    No tasks: (-1, 1)."""
    n = len(differences)
    if n == 0:
        return -1.0, 1.0, MISSED_SHARE
    mean = float(differences.mean())
    low, high = missed_share_interval(mean, n, confidence, -1.0, 1.0)
    bottom, top = float(differences.min()), float(differences.max())
    if n < 2 or top - bottom < 1e-12:
        return low, high, MISSED_SHARE  # no spread: nothing but the missed share
    room = (mean - bottom) * (top - mean)
    variance = float(differences.var(ddof=1))
    effective = n if room <= 0 else max(float(n), n * room / variance)
    critical = _t_quantile(0.5 + confidence / 2, n - 1)
    found = _score_interval((mean - bottom) / (top - bottom), effective, critical)
    spread = (bottom + (top - bottom) * found.low, bottom + (top - bottom) * found.high)
    method = CLUSTERED_SPREAD if spread[0] <= low and spread[1] >= high else WIDENED_SPREAD
    return min(spread[0], low), max(spread[1], high), method


def clustered_difference(a: Outcomes, b: Outcomes, confidence: float = 0.95) -> ClusteredDifference:
    """b minus a on the same tasks, the task as the unit (Miller 2024, "Adding Error Bars to
    Evals"): per-task rates, their mean difference, the cluster-robust standard error
    sd(differences) / sqrt(tasks), `difference_interval` (analytic and deterministic) and
    `sign_flip_test`. Repeating trials sharpens each task's rate but adds no tasks.
    No tasks: (0, 0, -1, 1, p = 1).
    """
    _check_confidence(confidence)
    if not a and not b:
        return ClusteredDifference(0, 0.0, 0.0, -1.0, 1.0, SignFlip(1.0, 1.0, 1.0, True), 0, 0)
    d = task_differences(a, b)
    difference = float(d.mean())
    se = float(d.std(ddof=1)) / sqrt(len(d)) if len(d) > 1 else 0.0
    low, high, method = difference_interval(d, confidence)
    test = sign_flip_test(d, lattice_scale([*a.values(), *b.values()]))
    better, worse = int((d > 1e-12).sum()), int((d < -1e-12).sum())
    return ClusteredDifference(len(d), difference, se, low, high, test, better, worse, method)


def minimum_detectable_effect(
    se: float, tasks: int, alpha: float = 0.05, power: float = 0.8, scale: int = 1
) -> float:
    """The smallest true difference a two-sided task-level test at `alpha` finds with `power`:
    (z[1 - alpha/2] + z[power]) x the cluster-robust standard error, but never below the
    smallest difference that could ever be significant: the fewest tasks m whose moving one
    way gives p = 2^(1-m) <= alpha, each by one step of the trial lattice (1 / `scale`, the
    `lattice_scale` of the rates). No tasks: 1.0 (nothing is detectable)."""
    if tasks == 0:
        return 1.0
    from scipy.special import ndtri

    fewest = 1
    while not at_most(2.0 ** (1 - fewest), alpha):
        fewest += 1
    normal = (float(ndtri(1 - alpha / 2)) + float(ndtri(power))) * se
    return min(1.0, max(normal, fewest / (scale * tasks)))

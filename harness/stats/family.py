"""Several tests, one error rate: the discrete Bonferroni procedure that makes the gate's rules
one family, and the exact tests whose null distributions it adds up.

A family of tests fails at least one true null with probability at most the sum of each test's
chance to reject (Bonferroni). For a test with a discrete null distribution given the data's
margins, that chance at threshold c is F(c), the largest p-value it can attain at or below c,
which can be far below c: a regression task that passed every trial on both sides cannot reject
at all, a Fisher test on 3 + 3 trials cannot go below 1/20. Test i is rejected when
sum_j F_j(p_i) <= alpha (Tarone 1990; Westfall and Wolfinger 1997; Döhler, Durand and Roquain
2018): tests that cannot reach significance take no share of alpha. The sum is the adjusted
p-value each rule prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import comb

TOLERANCE = 1e-9  # relative: a p-value equal to its level up to rounding counts as equal


@dataclass(frozen=True, slots=True)
class NullLevels:
    """The distribution function F(c) = P(p <= c) of a test's p-value under its null, given the
    margins the test conditions on. A discrete test lists the p-values it can attain; a test
    treated as continuous has F(c) = c from its smallest attainable p-value on, 0 below."""

    levels: tuple[float, ...] = ()  # attainable p-values, ascending (discrete tests)
    continuous_from: float | None = None  # the smallest attainable p-value (continuous tests)

    @property
    def minimum(self) -> float:
        """The smallest p-value the test can give with these margins."""
        if self.continuous_from is not None:
            return self.continuous_from
        return self.levels[0] if self.levels else 1.0

    def at(self, c: float) -> float:
        """F(c): the chance under the null that the p-value is at most c."""
        if self.continuous_from is not None:
            return min(1.0, c) if at_most(self.continuous_from, c) else 0.0
        return max((v for v in self.levels if at_most(v, c)), default=0.0)


def at_most(p: float, level: float) -> bool:
    """p <= level, forgiving rounding (an exact 1/20 computed in floats is still 0.05)."""
    return p <= level * (1 + TOLERANCE)


def adjusted_p_values(tests: Sequence[tuple[float, NullLevels]]) -> list[float]:
    """Each test's discrete-Bonferroni adjusted p-value, sum_j F_j(p_i) capped at 1: reject
    test i when it is at most alpha, and the family's chance of any false rejection is at most
    alpha."""
    return [min(1.0, sum(null.at(p) for _, null in tests)) for p, _ in tests]


SCORE_STEP = 0.01  # the grid of -log p of `combined_decline`: the statistic is exact on it


def combined_decline(tables: Sequence[tuple[int, int, int, int]]) -> tuple[float, NullLevels]:
    """One-sided exact test that the candidate declined on some of several tasks, each table
    (baseline passes, baseline trials, candidate passes, candidate trials). Each task's
    one-sided Fisher exact p-value (given the task's passes over both sides, the candidate's
    share is hypergeometric when both sides have the same probability on the task: trials
    exchangeable between the runs) is combined by Fisher's method, sum of -log p (on a grid of
    `SCORE_STEP`), and the sum's null distribution is the exact convolution of the tasks'. So
    a task that broke completely counts more than several that slipped by a trial, a fixed
    task (p = 1) cannot hide a broken one, and a task that passed or failed every trial on both
    sides adds nothing. For one task it is Fisher's exact one-sided test."""
    import numpy as np

    dist, observed = np.ones(1), 0
    for base_passed, base_trials, cand_passed, cand_trials in tables:
        total, passes = base_trials + cand_trials, base_passed + cand_passed
        lowest, highest = max(0, passes - base_trials), min(passes, cand_trials)
        if lowest == highest:
            continue  # every split is the same: no evidence either way
        ways = comb(total, cand_trials)
        masses = [
            comb(passes, k) * comb(total - passes, cand_trials - k) / ways
            for k in range(lowest, highest + 1)
        ]
        tails = np.minimum(1.0, np.cumsum(masses))  # Fisher's p-value at each split
        scores = np.rint(-np.log(tails) / SCORE_STEP).astype(int)
        moved = np.zeros(len(dist) + int(scores.max()))
        for score, mass in zip(scores, masses, strict=True):
            moved[score : score + len(dist)] += mass * dist
        dist = moved
        observed += int(scores[cand_passed - lowest])
    at_least = np.minimum(1.0, np.cumsum(dist[::-1])[::-1])  # P(sum >= s) for every s
    possible = at_least[dist > 0]
    return float(at_least[observed]), NullLevels(levels=tuple(sorted(set(possible.tolist()))))


def fewest_for_fisher(alpha: float, limit: int = 50) -> int:
    """The fewest trials per side at which one task going from every trial passing to every
    trial failing reaches `alpha` in Fisher's test (3 at 0.05: 1/20)."""
    for trials in range(1, limit + 1):
        if at_most(1 / comb(2 * trials, trials), alpha):
            return trials
    return limit

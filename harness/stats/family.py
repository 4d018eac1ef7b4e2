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


def fisher_decline(
    base_passed: int, base_trials: int, cand_passed: int, cand_trials: int
) -> tuple[float, NullLevels]:
    """One-sided Fisher exact test that the candidate passes a task less often than the
    baseline, and the p-values it can attain. Given the task's passes over both sides, the
    candidate's share is hypergeometric when both sides have the same chance on the task (its
    trials exchangeable between the runs); the p-value is the chance of the candidate passing
    at most as often as it did. A task that passed (or failed) every trial on both sides
    attains nothing below 1, so it takes no share of the family's alpha."""
    total, passes = base_trials + cand_trials, base_passed + cand_passed
    lowest, highest = max(0, passes - base_trials), min(passes, cand_trials)
    ways = comb(total, cand_trials)
    levels, reached = [], 0.0
    for k in range(lowest, highest + 1):
        reached += comb(passes, k) * comb(total - passes, cand_trials - k) / ways
        levels.append(min(1.0, reached))
    levels[-1] = 1.0  # the whole distribution: exactly 1, whatever the rounding
    return levels[cand_passed - lowest], NullLevels(levels=tuple(levels))


def fewest_for_fisher(alpha: float, limit: int = 50) -> int:
    """The fewest trials per side at which one task going from every trial passing to every
    trial failing reaches `alpha` in Fisher's test (3 at 0.05: 1/20; 1/C(2n, n) at n)."""
    for trials in range(1, limit + 1):
        if at_most(1 / comb(2 * trials, trials), alpha):
            return trials
    return limit

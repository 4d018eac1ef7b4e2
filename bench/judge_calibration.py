"""The judge's calibration measured where the truth is known: kappa's interval, the gate's judge
rule, and the signed bias.

A judge and people label each session pass/fail and good/bad; a population is the four cells'
probabilities, set by people's good rate, the judge's pass rate and the true Cohen's kappa.
Labelled sessions are drawn from it independently (a multinomial table), and the harness's own
code reads each table (`Calibration`, and the gate's `judge_verdict`).

Part 1, coverage: the share of 95% intervals (`Calibration.kappa_interval`) holding the true
kappa, at 10 to 100 sessions, good rates of 50% to 90%, a judge as strict as people or 10 points
stricter, true kappas 0 to 0.95; and how often the lower end is above the true kappa (a one-sided
97.5% bound: at most 2.5% plus noise). Target: 0.93-0.97.

Part 2, the judge rule with `min_judge_kappa: 0.6` and `min_judge_sessions` at its default: how
often a judge whose true kappa is 0.4 passes (a false pass; target at most 5%), one exactly at
the floor (at most the 2.5% of a one-sided bound) and one whose true kappa is 0.8 (its power),
at 10, 20, 50 and 100 sessions; beside it the rule as it was, the point estimate against the
floor with no minimum.

Part 3, bias: a judge 10 points stricter than people (passes 70% where people marked 80% good,
kappa 0.6): the mean signed bias and its interval's coverage, and what the old "bias" (1 -
precision) showed.

Last line: coverage_min=X coverage_median=X lower_above_max=X false_pass_n<N>=X at_floor_n<N>=X
power_n<N>=X old_false_pass_n<N>=X bias_mean=X bias_coverage=X old_bias_mean=X

Run: python bench/judge_calibration.py [samples per cell, default 1000] (about 3 minutes)
"""

from __future__ import annotations

import sys
from functools import cache

import numpy as np

from harness.defaults import MIN_JUDGE_SESSIONS
from harness.gate.judges import judge_verdict
from harness.production.calibrate import CELLS, Calibration

SIZES = (10, 20, 30, 50, 100)
RATES = ((0.5, 0.5), (0.8, 0.8), (0.8, 0.7), (0.9, 0.9))  # (people's good rate, judge's pass rate)
KAPPAS = (0.0, 0.4, 0.6, 0.8, 0.95)
FLOOR = 0.6


def cells(kappa: float, good: float, passes: float) -> np.ndarray | None:
    """The cells' probabilities (`CELLS` order) of a judge with these rates and true kappa;
    None when no population has them."""
    chance = passes * good + (1 - passes) * (1 - good)
    shift = kappa * (1 - chance) / 2  # observed agreement = chance + 2 x shift
    found = np.array(
        [
            passes * good + shift,
            passes * (1 - good) - shift,
            (1 - passes) * good - shift,
            (1 - passes) * (1 - good) + shift,
        ]
    )
    return None if (found < -1e-12).any() else np.clip(found, 0, 1)


@cache
def calibration(table: tuple[int, ...]) -> Calibration:
    return Calibration(table=dict(zip(CELLS, table, strict=True)))


@cache
def interval(table: tuple[int, ...]) -> tuple[float, float]:
    found = calibration(table).kappa_interval
    assert found is not None
    return found


@cache
def verdict(table: tuple[int, ...]) -> bool:
    """The gate's judge rule on this table, at `FLOOR` and the default minimum of sessions."""
    return judge_verdict(calibration(table), FLOOR, MIN_JUDGE_SESSIONS)[0]


def tables(rng: np.random.Generator, probabilities: np.ndarray, n: int, samples: int) -> list:
    return [tuple(int(c) for c in row) for row in rng.multinomial(n, probabilities, samples)]


def coverage(rng: np.random.Generator, samples: int) -> tuple[list[float], list[float]]:
    print(f"coverage of kappa's 95% interval ({samples} samples per cell):")
    print(f"{'sessions':>8} {'good':>5} {'pass':>5} {'kappa':>6} {'coverage':>9} {'low>kappa':>10}")
    covered, above = [], []
    for n in SIZES:
        for good, passes in RATES:
            for kappa in KAPPAS:
                probabilities = cells(kappa, good, passes)
                if probabilities is None:
                    continue
                drawn = [interval(t) for t in tables(rng, probabilities, n, samples)]
                held = np.mean([low <= kappa <= high for low, high in drawn])
                high_low = np.mean([low > kappa for low, _ in drawn])
                covered.append(float(held))
                above.append(float(high_low))
                print(f"{n:8} {good:5.1f} {passes:5.1f} {kappa:6.2f} {held:9.3f} {high_low:10.3f}")
    print(
        f"coverage: min {min(covered):.3f}, median {np.median(covered):.3f}, share of cells in "
        f"0.93-0.97 or above {np.mean([c >= 0.93 for c in covered]):.2f}; lower end above the "
        f"true kappa at most {max(above):.3f}"
    )
    return covered, above


def rule(rng: np.random.Generator, samples: int) -> dict[str, float]:
    print(
        f"\njudge rule, min_judge_kappa {FLOOR}, min_judge_sessions {MIN_JUDGE_SESSIONS} "
        f"(the default), {samples} samples; pass rates as: new rule / point estimate >= floor"
    )
    figures: dict[str, float] = {}
    for n in (10, 20, 50, 100):
        passes_at: dict[float, list[float]] = {0.4: [], 0.6: [], 0.8: []}
        worst_old = 0.0
        for good, passes in RATES[:3]:
            for kappa in passes_at:
                probabilities = cells(kappa, good, passes)
                if probabilities is None:  # a judge 10 points stricter cannot reach 0.8
                    continue
                drawn = tables(rng, probabilities, n, samples)
                new = float(np.mean([verdict(t) for t in drawn]))
                old = np.mean(
                    [(k := calibration(t).kappa) is not None and k >= FLOOR for t in drawn]
                )
                print(
                    f"  {n:3} sessions, good {good:.1f}, judge passes {passes:.1f}, true kappa "
                    f"{kappa}: passes {new:.3f} / {old:.3f}"
                )
                passes_at[kappa].append(new)
                if kappa == 0.4:
                    worst_old = max(worst_old, float(old))
        figures[f"false_pass_n{n}"] = max(passes_at[0.4])
        figures[f"at_floor_n{n}"] = max(passes_at[0.6])
        figures[f"power_n{n}"] = min(passes_at[0.8])
        figures[f"old_false_pass_n{n}"] = worst_old
        print(
            f"  {n} sessions: a kappa-0.4 judge passes at most {max(passes_at[0.4]):.3f} (the old "
            f"rule {worst_old:.3f}), one at the floor at most {max(passes_at[0.6]):.3f}; a "
            f"kappa-0.8 judge passes {min(passes_at[0.8]):.3f}-{max(passes_at[0.8]):.3f}"
        )
    return figures


def bias(rng: np.random.Generator, samples: int) -> dict[str, float]:
    good, passes, kappa = 0.8, 0.7, 0.6
    probabilities = cells(kappa, good, passes)
    assert probabilities is not None
    truth = passes - good
    print(f"\na judge {abs(truth) * 100:.0f} points stricter than people, kappa {kappa}:")
    figures: dict[str, float] = {}
    for n in (30, 100):
        found, held, old = [], [], []
        for table in tables(rng, probabilities, n, samples):
            c = calibration(table)
            low, high = c.bias_interval or (np.nan, np.nan)
            assert c.bias is not None
            found.append(c.bias)
            held.append(low <= truth <= high)
            if c.precision is not None:
                old.append(1 - c.precision)
        print(
            f"  {n} sessions: bias mean {np.mean(found):+.3f} (true {truth:+.2f}), its interval "
            f"covers {np.mean(held):.3f}; the old bias (1 - precision) read {np.mean(old):.3f}"
        )
        figures = {
            "bias_mean": float(np.mean(found)),
            "bias_coverage": float(np.mean(held)),
            "old_bias_mean": float(np.mean(old)),
        }
    agreeing = Calibration(table={"pass_good": 3, "pass_bad": 0, "fail_good": 0, "fail_bad": 2})
    low, high = agreeing.kappa_interval or (np.nan, np.nan)
    print(f"  5 agreeing sessions: kappa {agreeing.kappa:.2f}, 95% {low:.2f} to {high:.2f}")
    return figures


def main() -> None:
    samples = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    rng = np.random.default_rng(1)
    covered, above = coverage(rng, samples)
    figures = {
        "coverage_min": min(covered),
        "coverage_median": float(np.median(covered)),
        "lower_above_max": max(above),
    }
    figures |= rule(rng, samples)
    figures |= bias(rng, samples)
    print(" ".join(f"{key}={value:.3f}" for key, value in figures.items()))


if __name__ == "__main__":
    main()

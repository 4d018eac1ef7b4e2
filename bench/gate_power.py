"""How often the gate's significance rule cries wolf, how often it catches a real drop, and
whether the interval of the difference covers the truth: on synthetic agents whose trials are
as correlated as real ones.

The generative model (one simulated gate run = a fresh sample of tasks, both variants played):
- Task difficulty: each task's baseline pass probability comes from a population where 10% of
  tasks sit near 0, 10% near 1 and 80% spread around the middle (Beta(2, 2)).
- Variant-by-task interaction: the candidate's probability on a task is the baseline's shifted
  on the logit scale by a common shift plus a per-task term of standard deviation `tau`, so a
  change can reshuffle which tasks pass; the common shift is calibrated so that the population
  mean drops by exactly `drop` points (0 for a null).
- Within-task correlation of trials: each trial of a task under one variant repeats that
  variant's first draw on the task with probability `rho`, else draws afresh (the correlation
  of two trials given the task is `rho`); `rho = 1` is a deterministic agent: every trial
  repeats, so more trials add no information, only more (task, trial) pairs.

The rule is `harness.gate.worse_than_baseline` (one-sided sign-flip permutation test over
tasks); the interval is `harness.stats.clustered_difference` (paired cluster bootstrap). The old
rule, a one-sided exact McNemar test over (task, trial) pairs, is shown beside it.

Prints the false-alarm rate under three nulls (identical variants; a change that reshuffles
tasks with the same mean; deterministic trials), the power to catch a 5- and a 10-point drop at
25/50/100/200 tasks x 1/4/8 trials (targets: at most 5% false alarms under every null, at least
80% power for a 10-point drop at 100 tasks x 4 trials), and the coverage of the 95% interval
of the difference (target 93-97%).

Run: python bench/gate_power.py [simulations per cell, default 1000]
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import numpy as np

from harness.gate import worse_than_baseline
from harness.stats import clustered_difference, mcnemar_exact

ALPHA = 0.05
TASKS = (25, 50, 100, 200)
TRIALS = (1, 4, 8)


@dataclass(frozen=True)
class Scenario:
    """One way two variants can differ (see the module docstring)."""

    name: str
    rho: float  # within-task correlation of trials given the task (1: deterministic)
    tau: float  # sd of the variant-by-task interaction on the logit scale
    drop: float  # the population mean pass rate falls by this much


IDENTICAL = Scenario("identical variants", rho=0.3, tau=0.0, drop=0.0)
RESHUFFLE = Scenario("reshuffled tasks, same mean", rho=0.3, tau=1.0, drop=0.0)
DETERMINISTIC = Scenario("deterministic trials", rho=1.0, tau=0.0, drop=0.0)
NULLS = (IDENTICAL, RESHUFFLE, DETERMINISTIC)
TYPICAL = {"rho": 0.3, "tau": 0.5}  # the alternatives: a drop on top of some reshuffling


def difficulty(tasks: int, rng: np.random.Generator) -> np.ndarray:
    """Baseline logits: 10% of tasks near 0, 10% near 1, 80% around the middle."""
    kind = rng.choice(3, size=tasks, p=[0.1, 0.1, 0.8])
    p = np.where(
        kind == 0,
        rng.beta(1, 20, tasks),
        np.where(kind == 1, rng.beta(20, 1, tasks), rng.beta(2, 2, tasks)),
    )
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def calibrate(scenario: Scenario, rng: np.random.Generator) -> float:
    """The common logit shift that lowers the population mean by `drop` with this `tau`."""
    logits = difficulty(400_000, rng)
    noise = rng.normal(0, scenario.tau, logits.size) if scenario.tau else 0.0
    target = sigmoid(logits).mean() - scenario.drop
    low, high = -5.0, 20.0
    for _ in range(60):
        shift = (low + high) / 2
        if sigmoid(logits + noise - shift).mean() > target:
            low = shift
        else:
            high = shift
    return (low + high) / 2


def play(p: np.ndarray, trials: int, rho: float, rng: np.random.Generator) -> np.ndarray:
    """Trial outcomes (tasks x trials): each repeats the task's first draw with chance rho."""
    first = rng.random(p.size)
    fresh = rng.random((p.size, trials))
    repeat = rng.random((p.size, trials)) < rho
    repeat[:, 0] = True
    draws = np.where(repeat, first[:, None], fresh)
    return draws < p[:, None]


def sample(
    scenario: Scenario, shift: float, tasks: int, trials: int, rng: np.random.Generator
) -> tuple[dict[str, list[bool]], dict[str, list[bool]]]:
    """One gate run's outcomes of both variants, per task id."""
    logits = difficulty(tasks, rng)
    interaction = rng.normal(0, scenario.tau, tasks) if scenario.tau else 0.0
    a = play(sigmoid(logits), trials, scenario.rho, rng)
    b = play(sigmoid(logits + interaction - shift), trials, scenario.rho, rng)
    ids = [f"t{i}" for i in range(tasks)]
    return (
        {t: row.tolist() for t, row in zip(ids, a, strict=True)},
        {t: row.tolist() for t, row in zip(ids, b, strict=True)},
    )


def alarms(
    scenario: Scenario, tasks: int, trials: int, runs: int, rng: np.random.Generator
) -> tuple[float, float]:
    """Share of gate runs the task-level rule (and the old McNemar rule) calls B worse."""
    shift = calibrate(scenario, rng)
    new = old = 0
    for _ in range(runs):
        a, b = sample(scenario, shift, tasks, trials, rng)
        new += worse_than_baseline(a, b, ALPHA)[0]
        flat_a = [o for t in a for o in a[t]]
        flat_b = [o for t in a for o in b[t]]
        old += mcnemar_exact(flat_a, flat_b, alternative="less").p_value < ALPHA
    return new / runs, old / runs


def coverage(
    scenario: Scenario, tasks: int, trials: int, runs: int, rng: np.random.Generator
) -> float:
    """Share of runs whose 95% interval of B - A holds the population difference."""
    shift = calibrate(scenario, rng)
    truth = -scenario.drop
    held = 0
    for index in range(runs):
        a, b = sample(scenario, shift, tasks, trials, rng)
        found = clustered_difference(a, b, seed=index)
        held += found.low <= truth <= found.high
    return held / runs


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    rng = np.random.default_rng(7)
    started = time.perf_counter()
    p = sigmoid(difficulty(100_000, rng))
    print(
        f"task model: {((p < 0.05) | (p > 0.95)).mean():.0%} of tasks near 0 or 1, mean pass "
        f"rate {p.mean():.0%}; {(2 * p * (1 - p)).mean():.0%} of tasks flip between two "
        "independent single trials"
    )
    print(
        f"rule: one-sided sign-flip test over tasks at alpha {ALPHA} (harness.gate."
        f"worse_than_baseline); {runs} simulated gate runs per cell; old rule in brackets: "
        "one-sided exact McNemar over (task, trial) pairs\n"
    )
    print("False alarms (target <= 5%):")
    header = "".join(f"{null.name:>32}" for null in NULLS)
    print(f"{'tasks':>6} {'trials':>6}{header}")
    worst = 0.0
    for tasks in TASKS:
        for trials in TRIALS:
            cells = [alarms(null, tasks, trials, runs, rng) for null in NULLS]
            worst = max(worst, *(new for new, _ in cells))
            text = "".join(f"{f'{new:.1%} [{old:.1%}]':>32}" for new, old in cells)
            print(f"{tasks:>6} {trials:>6}{text}")
    noise = (0.05 * 0.95 / runs) ** 0.5
    print(
        f"worst false-alarm rate of the task-level rule: {worst:.1%} (Monte Carlo standard error "
        f"of a 5% rate at {runs} runs: {noise:.1%}; under these nulls the per-task differences "
        "are symmetric, so the sign-flip test is exact: at most 5% up to that noise)\n"
    )

    print(
        f"Power (target >= 80% for -10 points at 100 x 4), alternatives with rho "
        f"{TYPICAL['rho']}, tau {TYPICAL['tau']}:"
    )
    print(f"{'tasks':>6} {'trials':>6} {'-5 points':>18} {'-10 points':>18}")
    for tasks in TASKS:
        for trials in TRIALS:
            cells = [
                alarms(Scenario("drop", drop=drop, **TYPICAL), tasks, trials, runs, rng)
                for drop in (0.05, 0.10)
            ]
            text = "".join(f"{f'{new:.1%} [{old:.1%}]':>18}" for new, old in cells)
            print(f"{tasks:>6} {trials:>6}{text}")

    print("\nCoverage of the 95% paired cluster-bootstrap interval (target 93-97%):")
    cases = {
        "-10 pts, rho 0.3, tau 0.5": Scenario("drop", drop=0.10, **TYPICAL),
        "reshuffle, same mean": RESHUFFLE,
        "deterministic, -10 pts": Scenario("deterministic drop", rho=1.0, tau=0.5, drop=0.10),
    }
    print(f"{'tasks':>6} {'trials':>6}" + "".join(f"{name:>30}" for name in cases))
    for tasks in TASKS:
        for trials in (1, 4):
            cells = [coverage(s, tasks, trials, runs // 2, rng) for s in cases.values()]
            print(f"{tasks:>6} {trials:>6}" + "".join(f"{c:>30.1%}" for c in cells))
    print(f"\n{time.perf_counter() - started:.0f}s")


if __name__ == "__main__":
    main()

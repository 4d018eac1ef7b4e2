"""How often the gate's significance rule cries wolf, and how often it catches a real drop.

Synthetic agents have known per-task pass probabilities, drawn as in published agent
benchmarks: some tasks sit near 0 or 1, most in between, so that a third or more of the tasks
flip between two runs of the same agent. Each simulated gate run samples both variants' episodes
(same tasks, k trials each) and applies `harness.gate.worse_than_baseline`, the gate's rule.

Prints the flip rate of the task model, the false-alarm rate for two identical variants (target
at most 5%), the power to catch a 10-point drop at 100 tasks x 4 trials (target at least 80%),
and the power curve for 25, 50, 100 and 200 tasks.

Run: python bench/gate_power.py [simulations]
"""

from __future__ import annotations

import sys

import numpy as np

from harness.gate import worse_than_baseline

ALPHA = 0.05
TRIALS = 4


def task_probabilities(tasks: int, rng: np.random.Generator) -> np.ndarray:
    """10% of tasks near 0, 10% near 1, 80% spread around the middle (Beta(2, 2))."""
    kind = rng.choice(3, size=tasks, p=[0.1, 0.1, 0.8])
    return np.where(
        kind == 0,
        rng.beta(1, 20, tasks),
        np.where(kind == 1, rng.beta(20, 1, tasks), rng.beta(2, 2, tasks)),
    )


def dropped(p: np.ndarray, points: float) -> np.ndarray:
    """The same tasks made worse by a shift in log-odds, so that the mean drops by `points`."""
    logit = np.log(np.clip(p, 1e-6, 1 - 1e-6) / np.clip(1 - p, 1e-6, 1))
    low, high = 0.0, 20.0
    for _ in range(60):
        shift = (low + high) / 2
        if (p.mean() - (1 / (1 + np.exp(-(logit - shift)))).mean()) < points:
            low = shift
        else:
            high = shift
    return 1 / (1 + np.exp(-(logit - low)))


def alarm_rate(tasks: int, points: float, simulations: int, rng: np.random.Generator) -> float:
    """Share of simulated gate runs in which the rule says the candidate is worse."""
    alarms = 0
    for _ in range(simulations):
        base = task_probabilities(tasks, rng)
        cand = dropped(base, points) if points else base
        a = rng.random((tasks, TRIALS)) < base[:, None]
        b = rng.random((tasks, TRIALS)) < cand[:, None]
        alarms += worse_than_baseline(a.ravel().tolist(), b.ravel().tolist(), ALPHA)[0]
    return alarms / simulations


def main() -> None:
    simulations = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    rng = np.random.default_rng(7)
    p = task_probabilities(100_000, rng)
    flips = (2 * p * (1 - p)).mean()
    print(
        f"task model: {((p < 0.05) | (p > 0.95)).mean():.0%} of tasks near 0 or 1; "
        f"{flips:.0%} of tasks flip between two identical runs (one trial each)"
    )
    print(
        f"gate rule: one-sided exact McNemar on (task, trial) pairs, alpha {ALPHA}, "
        f"{TRIALS} trials per task, {simulations} simulated gate runs per cell\n"
    )
    false_alarms = alarm_rate(100, 0.0, simulations, rng)
    power = alarm_rate(100, 0.10, simulations, rng)
    print(f"false-alarm rate, identical variants, 100 tasks: {false_alarms:.1%} (target <= 5%)")
    print(f"power, 10-point drop, 100 tasks x {TRIALS} trials: {power:.1%} (target >= 80%)\n")
    print(f"{'tasks':>6} {'false alarm':>12} {'power -5 pts':>13} {'power -10 pts':>14}")
    for tasks in (25, 50, 100, 200):
        cells = [alarm_rate(tasks, points, simulations // 2, rng) for points in (0, 0.05, 0.10)]
        print(f"{tasks:>6} {cells[0]:>12.1%} {cells[1]:>13.1%} {cells[2]:>14.1%}")


if __name__ == "__main__":
    main()

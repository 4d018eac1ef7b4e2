"""Do the intervals every printer shows cover the population, with few tasks, correlated trials
and rare failures?

Measures the product's own functions on synthetic agents: the run interval is
`harness.stats.run_rate` (each run's pass rate), the interval of B - A
`harness.stats.clustered_difference` (compare, the gate, reports). A simulated run draws a fresh
sample of tasks from a population and plays every task's trials; an interval covers when it
holds the population's rate (or difference), the figure a new sample of tasks would estimate.

The generative model is bench/gate_power.py's (imported, not copied): task difficulty
(`difficulty`: mixed, easy and hard populations), trials correlated within a task (`play`: each
trial repeats the variant's habit on the task with chance sqrt(rho); rho 1 is a deterministic
agent), smooth drops (`sample` on a `Cell` with `tau` and `drop`: the candidate shifted on the
logit scale by a common shift and a per-task term). This file adds two populations and one change
the gate's bench has no need of:
- Rare failures (`near_certain`): most tasks pass nearly always (probability 1 - 10^u, u uniform
  on [-3, -1.5]: 0.968 to 0.999) and a share of weaker tasks (Beta(4, 2), mean 2/3) carries most
  of the failures; at 20-30 tasks some samples hold no weaker task at all.
- A deterministic break (`broken_pair`): each task breaks with chance `share`; a broken task
  passed nearly always on the baseline (Beta(20, 1)) and fails every trial on the candidate; the
  other tasks are the same agent on both sides (shared habits). The population's B - A is
  -share x 20/21; at 6-20 tasks many samples hold no broken task.

Prints the tables and, last, one machine-readable line:
run_ci_coverage_min=X difference_ci_coverage_min=X zero_width_max=X

Run: python bench/interval_coverage.py [simulations per cell, default 2000]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from multiprocessing import Pool
from pathlib import Path
from types import ModuleType

import numpy as np

from harness.stats import clustered_difference, run_rate

CONFIDENCE = 0.95
TARGET = 0.93  # the least coverage a 95% interval may have in any cell
STRONG = (-3.0, -1.5)  # log10 of a near-certain task's failure probability: uniform on this
WEAK_MEAN = 4 / 6  # Beta(4, 2): the weaker tasks of a near-certain population
RARE = {"rare 5%": 0.05, "rare 10%": 0.10, "rare 20%": 0.20, "all near-certain": 0.0}
BROKEN_MEAN = 20 / 21  # Beta(20, 1): a broken task's baseline pass probability


@cache
def model() -> ModuleType:
    """bench/gate_power.py, imported on first use (it may import this file in turn)."""
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    import gate_power

    return gate_power


@dataclass(frozen=True)
class RunRegime:
    """One setting of the run interval: a population of tasks, tasks x trials, correlation."""

    population: str  # a population of gate_power's `difficulty`, or a key of RARE
    tasks: int
    trials: int
    rho: float

    @property
    def label(self) -> str:
        return f"{self.population:>16} {self.tasks:>3} x {self.trials:<2} rho {self.rho}"


@dataclass(frozen=True)
class DifferenceRegime:
    """One setting of the interval of B - A: a deterministic break of a share of the tasks, or
    gate_power's smooth change (`tau`, `drop`)."""

    tasks: int
    trials: int
    rho: float
    share: float = 0.0  # break: the chance each task breaks (0: a smooth change instead)
    tau: float = 0.0
    drop: float = 0.0
    population: str = "mixed"

    @property
    def truth(self) -> float:
        return -self.share * BROKEN_MEAN if self.share else -self.drop

    @property
    def label(self) -> str:
        change = (
            f"{self.share:.0%} of tasks break"
            if self.share
            else f"drop {self.drop:.0%}, tau {self.tau}"
        )
        return f"{self.tasks:>3} x {self.trials:<2} rho {self.rho:<4} {change}"


@dataclass(frozen=True)
class Coverage:
    """How one regime's 95% intervals fared over the simulated runs."""

    coverage: float  # share of runs whose interval holds the population's figure
    width: float  # mean width
    zero_width: float  # share of runs whose interval has no width
    widened: float  # share of runs whose interval the missed-share bound widened


def population_rate(population: str) -> float:
    """The population's mean pass probability."""
    if population in RARE:
        low, high = STRONG
        failing = (10**high - 10**low) / ((high - low) * np.log(10))  # E[10^u]
        return (1 - RARE[population]) * (1 - failing) + RARE[population] * WEAK_MEAN
    return float(model().truth(population))


def near_certain(tasks: int, rng: np.random.Generator, weak: float) -> np.ndarray:
    """Pass probabilities of a sample of tasks that mostly pass nearly always."""
    strong = 1 - 10 ** rng.uniform(*STRONG, tasks)
    return np.where(rng.random(tasks) < weak, rng.beta(4, 2, tasks), strong)


def pass_probabilities(population: str, tasks: int, rng: np.random.Generator) -> np.ndarray:
    if population in RARE:
        return near_certain(tasks, rng, RARE[population])
    return model().difficulty(tasks, rng, population)


def broken_pair(regime: DifferenceRegime, rng: np.random.Generator) -> tuple[dict, dict]:
    """The baseline's and candidate's outcomes when each task breaks with chance `share`."""
    gate_power = model()
    p = gate_power.difficulty(regime.tasks, rng, regime.population)
    broken = rng.random(regime.tasks) < regime.share
    p = np.where(broken, rng.beta(20, 1, regime.tasks), p)
    habits = rng.random(regime.tasks)  # the same agent on both sides, but for the break
    base = gate_power.play(p, regime.trials, regime.rho, rng, habits)
    cand = gate_power.play(p, regime.trials, regime.rho, rng, habits)
    cand[broken] = False
    return gate_power.outcomes(base), gate_power.outcomes(cand)


def difference_pair(regime: DifferenceRegime, rng: np.random.Generator) -> tuple[dict, dict]:
    if regime.share:
        return broken_pair(regime, rng)
    gate_power = model()
    cell = gate_power.Cell(
        regime.tasks,
        regime.trials,
        rho=regime.rho,
        tau=regime.tau,
        drop=regime.drop,
        population=regime.population,
    )
    return gate_power.sample(cell, rng)


def _tally(found: list[tuple[float, float, bool]], target: float) -> np.ndarray:
    """Covered, width, zero width, widened: sums over runs."""
    lows, highs, widened = (np.array(column) for column in zip(*found, strict=True))
    return np.array(
        [
            ((lows <= target + 1e-12) & (target - 1e-12 <= highs)).sum(),
            (highs - lows).sum(),
            (highs - lows <= 1e-12).sum(),
            widened.sum(),
        ],
        dtype=float,
    )


def _run_job(job: tuple[RunRegime, int, int]) -> np.ndarray:
    regime, runs, seed = job
    rng, gate_power = np.random.default_rng(seed), model()
    found = []
    for _ in range(runs):
        p = pass_probabilities(regime.population, regime.tasks, rng)
        rate = run_rate(gate_power.outcomes(gate_power.play(p, regime.trials, regime.rho, rng)))
        found.append((rate.low, rate.high, "widened" in rate.method))
    return _tally(found, population_rate(regime.population))


def _difference_job(job: tuple[DifferenceRegime, int, int]) -> np.ndarray:
    regime, runs, seed = job
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(runs):
        result = clustered_difference(*difference_pair(regime, rng), CONFIDENCE)
        found.append((result.low, result.high, "share" in getattr(result, "method", "")))
    return _tally(found, regime.truth)


def _measure(
    job, regimes: Sequence, simulations: int, pool: Pool | None, seed: int
) -> list[Coverage]:
    """Each regime's coverage, its simulations split in parts over the pool's processes."""
    parts = 4 if simulations >= 4 else 1
    jobs = [
        (regime, simulations // parts, seed + 1000 * r + k)
        for r, regime in enumerate(regimes)
        for k in range(parts)
    ]
    done = pool.map(job, jobs) if pool is not None else [job(j) for j in jobs]
    runs = simulations // parts * parts
    found = []
    for r in range(len(regimes)):
        total = sum(done[r * parts : (r + 1) * parts])
        found.append(Coverage(*(float(x) for x in total / runs)))
    return found


def run_interval_coverage(
    regimes: Sequence[RunRegime], simulations: int = 1000, pool: Pool | None = None
) -> list[Coverage]:
    """The coverage of `run_rate`'s 95% interval of the population's pass rate, per regime."""
    return _measure(_run_job, regimes, simulations, pool, seed=7)


def difference_interval_coverage(
    regimes: Sequence[DifferenceRegime], simulations: int = 1000, pool: Pool | None = None
) -> list[Coverage]:
    """The coverage of `clustered_difference`'s 95% interval of the population's B - A."""
    return _measure(_difference_job, regimes, simulations, pool, seed=99)


SIZES = ((6, 1), (6, 4), (10, 4), (20, 1), (20, 4), (20, 16), (50, 8), (100, 4))
RUN_REGIMES = [
    *(
        RunRegime(population, tasks, trials, rho)
        for population in ("mixed", "easy", "hard")
        for tasks, trials in SIZES
        for rho in ((0.0,) if trials == 1 else (0.0, 0.3, 1.0))
    ),
    *(
        RunRegime(population, tasks, trials, rho)
        for population in ("rare 5%", "rare 10%", "rare 20%")
        for tasks, trials in ((20, 8), (20, 16), (30, 8), (30, 16))
        for rho in (0.0, 0.3, 1.0)
    ),
    *(RunRegime("all near-certain", tasks, 8, rho) for tasks in (20, 30) for rho in (0.0, 1.0)),
]
DIFFERENCE_REGIMES = [
    *(
        DifferenceRegime(tasks, trials, rho, share=0.1)
        for tasks in (6, 10, 20, 50, 100)
        for trials in (1, 3, 8)
        for rho in (0.3, 1.0)
    ),
    *(DifferenceRegime(tasks, 3, 1.0, share=0.2) for tasks in (6, 10, 20)),
    *(
        DifferenceRegime(tasks, trials, rho, tau=tau, drop=drop)
        for tasks in (6, 10, 20, 50, 100)
        for trials in (1, 4)
        for rho, tau, drop in ((0.3, 0.5, 0.1), (0.3, 1.0, 0.0), (1.0, 0.5, 0.0))
    ),
]


def main() -> None:
    simulations = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    started = time.perf_counter()
    noise = (CONFIDENCE * (1 - CONFIDENCE) / simulations) ** 0.5
    print(
        f"{simulations} simulated runs per cell; Monte Carlo standard error of a 95% coverage: "
        f"{noise:.1%}; target: every cell >= {TARGET:.0%}\n"
    )
    with Pool(2) as pool:
        runs = run_interval_coverage(RUN_REGIMES, simulations, pool)
        differences = difference_interval_coverage(DIFFERENCE_REGIMES, simulations, pool)
    print(
        "1. harness.stats.run_rate: coverage of the 95% interval of the population's pass rate "
        "(mean width; share of runs the missed-share bound widened)"
    )
    for regime, found in zip(RUN_REGIMES, runs, strict=True):
        rate = population_rate(regime.population)
        print(
            f"  {regime.label} (rate {rate:5.1%}): {found.coverage:6.1%}  width "
            f"{found.width:5.3f}  widened {found.widened:4.0%}"
        )
    print(
        "\n2. harness.stats.clustered_difference: coverage of the 95% interval of the "
        "population's B - A (mean width; share of zero-width intervals)"
    )
    for regime, found in zip(DIFFERENCE_REGIMES, differences, strict=True):
        print(
            f"  {regime.label:<40} (B - A {regime.truth:+6.1%}): {found.coverage:6.1%}  width "
            f"{found.width:5.3f}  zero-width {found.zero_width:4.0%}"
        )
    run_min = min(found.coverage for found in runs)
    difference_min = min(found.coverage for found in differences)
    zero_width = max(found.zero_width for found in [*runs, *differences])
    print(f"\n{time.perf_counter() - started:.0f}s")
    print(
        f"run_ci_coverage_min={run_min:.4f} difference_ci_coverage_min={difference_min:.4f} "
        f"zero_width_max={zero_width:.4f}"
    )


if __name__ == "__main__":
    main()

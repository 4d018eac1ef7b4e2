"""Is every decision of the gate a calibrated test, and does every run interval cover?

Runs the product's own code on synthetic agents whose trials are as correlated as real ones:
the gate is `harness.gate.evaluate_gate` on `GradedEpisodes.from_outcomes` (every rule together:
errors, tasks, floors, worse than the baseline, regression suite, budgets), the run interval is
`harness.stats.run_rate`, the interval of a difference `harness.stats.clustered_difference`.

The generative model (one simulated gate run = a fresh sample of tasks, both variants played):
- Task difficulty: each task's baseline pass probability comes from a population where 10% of
  tasks sit near 0, 10% near 1 and 80% spread around the middle (Beta(2, 2)); two other
  populations (mostly easy, mostly hard) check the run interval away from 50%.
- Variant-by-task interaction: the candidate's probability on a task is the baseline's shifted
  on the logit scale by a common shift plus a per-task term of standard deviation `tau`; the
  shift is calibrated so that the population mean drops by exactly `drop` points (0: a null).
- Within-task correlation of trials: each trial of a task repeats the variant's habit on the
  task (one draw) with probability sqrt(`rho`), else draws afresh, so that two trials of a task
  are correlated `rho` given the task (`rho` = 1: a deterministic agent).
  Identical variants share their habits (the candidate is the baseline: the same deterministic
  behaviour on each task, independent noise), so their trials are exchangeable between the
  runs. Two different variants of equal quality each have their own habits: on a task one may
  always pass where the other always fails, a real change of that task (the regression suite
  rightly flags it) with the same mean (the worse-than-baseline rule must not).
- Tasks have levels 1, 2, 3 in turn, so every level's population rate is the suite's; "floors"
  cells put every level's floor at that rate, the boundary where a floor is hardest to hold.
- The first R tasks are tagged `regression`, drawn from the same population (flaky ones too).
- Error cells turn a share of the candidate's passing episodes into agent-side errors: errors
  that hide would-be passes, the bias of dropping them.

Prints, per section, the figures and their targets; the last line is machine-readable:
gate_false_failure_max=X run_ci_coverage_min=X error_null_max=X power_100x4=X

Run: python bench/gate_power.py [simulations per cell, default 1000]
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from functools import cache
from multiprocessing import Pool
from pathlib import Path

import numpy as np

from harness.compare import GradedEpisodes
from harness.domains.support import SupportDesk
from harness.gate import evaluate_gate
from harness.sim.suite import TaskCase
from harness.specs.gate import Gate
from harness.specs.load import Loaded
from harness.specs.persona import Persona
from harness.specs.task import Task
from harness.stats import clustered_difference, run_rate, wilson_interval

ALPHA = 0.05
POPULATIONS = {  # (share near 0, share near 1, share in the middle), Beta of the middle
    "mixed": ((0.1, 0.1, 0.8), (2, 2)),
    "easy": ((0.02, 0.3, 0.68), (5, 2)),
    "hard": ((0.3, 0.05, 0.65), (1, 4)),
}


@dataclass(frozen=True)
class Cell:
    """One simulated setting of the gate."""

    tasks: int
    trials: int
    regression: int = 0  # tasks tagged regression
    floors: bool = False  # level floors at the population's rate
    rho: float = 0.3
    tau: float = 0.0
    drop: float = 0.0
    errors: float = 0.0  # share of the candidate's episodes turned from passes into errors
    population: str = "mixed"
    own_habits: bool = False  # the candidate draws its own habits (a different variant)


def difficulty(tasks: int, rng: np.random.Generator, population: str = "mixed") -> np.ndarray:
    """Baseline pass probabilities of a sample of tasks."""
    shares, (a, b) = POPULATIONS[population]
    kind = rng.choice(3, size=tasks, p=list(shares))
    p = np.where(
        kind == 0,
        rng.beta(1, 20, tasks),
        np.where(kind == 1, rng.beta(20, 1, tasks), rng.beta(a, b, tasks)),
    )
    return np.clip(p, 1e-6, 1 - 1e-6)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


@cache
def truth(population: str) -> float:
    """The population's mean pass probability."""
    return float(difficulty(2_000_000, np.random.default_rng(0), population).mean())


@cache
def calibrate(tau: float, drop: float, population: str = "mixed") -> float:
    """The common logit shift that lowers the population mean by `drop` with this `tau`."""
    rng = np.random.default_rng(1)
    p = difficulty(400_000, rng, population)
    logits = np.log(p / (1 - p))
    noise = rng.normal(0, tau, logits.size) if tau else 0.0
    target = sigmoid(logits).mean() - drop
    low, high = -5.0, 20.0
    for _ in range(60):
        shift = (low + high) / 2
        if sigmoid(logits + noise - shift).mean() > target:
            low = shift
        else:
            high = shift
    return (low + high) / 2


def play(
    p: np.ndarray,
    trials: int,
    rho: float,
    rng: np.random.Generator,
    habits: np.ndarray | None = None,
) -> np.ndarray:
    """Trial outcomes (tasks x trials): each repeats the variant's habit on the task (a uniform
    draw per task, given or drawn) with chance sqrt(rho), else draws afresh: two trials of a
    task agree beyond chance with correlation rho."""
    habits = rng.random(p.size) if habits is None else habits
    fresh = rng.random((p.size, trials))
    repeat = rng.random((p.size, trials)) < rho**0.5
    return np.where(repeat, habits[:, None], fresh) < p[:, None]


def outcomes(played: np.ndarray) -> dict[str, list[bool | None]]:
    return {f"t{i}": row.tolist() for i, row in enumerate(played)}


def sample(cell: Cell, rng: np.random.Generator) -> tuple[dict, dict]:
    """One gate run's outcomes of the baseline and the candidate (None: an error)."""
    p = difficulty(cell.tasks, rng, cell.population)
    logits = np.log(p / (1 - p))
    interaction = rng.normal(0, cell.tau, cell.tasks) if cell.tau else 0.0
    shift = calibrate(cell.tau, cell.drop, cell.population) if cell.tau or cell.drop else 0.0
    habits = rng.random(cell.tasks)
    base = play(p, cell.trials, cell.rho, rng, habits)
    own = cell.own_habits or cell.tau or cell.drop
    cand_p = sigmoid(logits + interaction - shift)
    cand = play(cand_p, cell.trials, cell.rho, rng, None if own else habits)
    candidate = outcomes(cand)
    if cell.errors:
        passes = np.argwhere(cand)
        hidden = round(cell.errors * cand.size)
        for index in rng.choice(len(passes), size=min(hidden, len(passes)), replace=False):
            task, trial = passes[index]
            candidate[f"t{task}"][trial] = None
    return outcomes(base), candidate


@cache
def cases(tasks: int, regression: int) -> list[TaskCase]:
    """Task cases with levels 1-3 in turn and the first `regression` tagged."""
    persona = Persona.model_construct(name="user")
    found = []
    for i in range(tasks):
        task = Task.model_validate(
            {
                "kind": "task",
                "id": f"t{i}",
                "title": f"task {i}",
                "level": 1 + i % 3,
                "tags": ["regression"] if i < regression else [],
                "domain": "support",
                "persona": "user",
                "scenario": {"reason": "synthetic"},
                "checks": [{"kind": "no_error"}],
            }
        )
        found.append(TaskCase(Loaded(task, Path(f"t{i}.yaml")), persona, SupportDesk, {}))
    return found


def config(cell: Cell) -> Gate:
    floors = dict.fromkeys((1, 2, 3), round(truth(cell.population), 4)) if cell.floors else {}
    return Gate(kind="gate", alpha=ALPHA, level_floors=floors)


def gate_counts(job: tuple[Cell, int, int]) -> dict[str, int]:
    """Simulate `runs` gate runs of a cell: how often the gate failed, each rule failed, the
    paired test over the pairs both graded said worse, and a rule was undecided."""
    cell, runs, seed = job
    rng = np.random.default_rng(seed)
    gate, suite = config(cell), cases(cell.tasks, cell.regression)
    counts = {"gate": 0, "worse": 0, "paired only": 0, "undecided": 0}
    for index in range(runs):
        base, cand = sample(cell, rng)
        result = evaluate_gate(
            gate,
            GradedEpisodes.from_outcomes(f"c{index}", "candidate", cand),
            GradedEpisodes.from_outcomes(f"b{index}", "baseline", base),
            suite,
        )
        counts["gate"] += not result.passed
        counts["undecided"] += any(rule.status == "undecided" for rule in result.rules)
        for rule in result.rules:
            if rule.status == "fail":
                counts[rule.rule] = counts.get(rule.rule, 0) + 1
        assert result.comparison is not None
        counts["paired only"] += result.comparison.tasks.p_worse <= ALPHA
    counts["worse"] = counts.get("worse than the baseline", 0)
    return counts


def simulate(pool: Pool, cells: list[Cell], runs: int) -> list[dict[str, float]]:
    """Each cell's rates, its runs split over the pool's processes."""
    parts = 4
    jobs = [
        (cell, runs // parts, 1000 * c + k) for c, cell in enumerate(cells) for k in range(parts)
    ]
    done = pool.map(gate_counts, jobs)
    rates = []
    for c in range(len(cells)):
        total: dict[str, int] = {}
        for counts in done[c * parts : (c + 1) * parts]:
            for key, n in counts.items():
                total[key] = total.get(key, 0) + n
        rates.append({key: n / (runs // parts * parts) for key, n in total.items()})
    return rates


def coverage(job: tuple[Cell, int, int]) -> tuple[float, float]:
    """Share of single runs whose 95% interval holds the population rate: the clustered
    `run_rate` and, for comparison, Wilson over episodes as if they were independent."""
    cell, runs, seed = job
    rng = np.random.default_rng(seed)
    target, held, pooled = truth(cell.population), 0, 0
    for _ in range(runs):
        played = play(difficulty(cell.tasks, rng, cell.population), cell.trials, cell.rho, rng)
        found = run_rate(outcomes(played))
        held += found.low <= target <= found.high
        low, high = wilson_interval(int(played.sum()), played.size)
        pooled += low <= target <= high
    return held / runs, pooled / runs


def difference_coverage(job: tuple[Cell, int, int]) -> float:
    """Share of runs whose 95% interval of B - A holds the population difference."""
    cell, runs, seed = job
    rng = np.random.default_rng(seed)
    held = 0
    for index in range(runs):
        base, cand = sample(cell, rng)
        found = clustered_difference(base, cand, seed=index)
        held += found.low <= -cell.drop <= found.high
    return held / runs


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    started = time.perf_counter()
    noise = (ALPHA * (1 - ALPHA) / runs) ** 0.5
    print(
        f"{runs} simulated gate runs per cell through harness.gate.evaluate_gate; Monte Carlo "
        f"standard error of a 5% rate: {noise:.1%}; alpha {ALPHA}\n"
    )
    with Pool(2) as pool:
        print("1. Whole-gate false failures, identical variants (target <= 5% in every cell):")
        nulls = [
            Cell(tasks, trials, regression, floors, rho)
            for tasks in (50,)
            for regression in (0, 5, 20)
            for trials in (1, 3)
            for floors in (False, True)
            for rho in (0.0, 0.3)
        ]
        found = simulate(pool, nulls, runs)
        print(
            f"{'tasks':>5} {'trials':>6} {'regression':>10} {'floors':>6} {'rho':>4} "
            f"{'gate fails':>10} {'worse':>6} {'suite':>6} {'floors':>6} {'undecided':>9}"
        )
        for cell, rates in zip(nulls, found, strict=True):
            floor = sum(v for k, v in rates.items() if k.startswith("level "))
            print(
                f"{cell.tasks:>5} {cell.trials:>6} {cell.regression:>10} "
                f"{'yes' if cell.floors else 'no':>6} {cell.rho:>4} {rates['gate']:>10.1%} "
                f"{rates['worse']:>6.1%} {rates.get('regression suite', 0):>6.1%} "
                f"{floor:>6.1%} {rates['undecided']:>9.1%}"
            )
        gate_max = max(rates["gate"] for rates in found)
        print(f"worst whole-gate false-failure rate: {gate_max:.1%}\n")

        print("2. The worse-than-baseline rule under other nulls (target <= 5%):")
        others = [
            Cell(tasks, trials, rho=rho, tau=tau, own_habits=True)
            for tasks, trials in ((25, 4), (100, 4), (100, 8))
            for rho, tau in ((0.3, 0.0), (0.3, 1.0), (1.0, 0.0))
        ]
        for cell, rates in zip(others, simulate(pool, others, runs), strict=True):
            name = {
                (0.3, 0.0): "each variant its own habits",
                (0.3, 1.0): "reshuffled tasks, same mean",
                (1.0, 0.0): "deterministic, own habits",
            }[(cell.rho, cell.tau)]
            print(f"  {cell.tasks} x {cell.trials}, {name}: {rates['worse']:.1%}")

        print(
            "\n3. Errors that hide would-be passes on the candidate, identical variants "
            "(target: the gate fails <= 5%):"
        )
        erring = [
            Cell(100, 4, errors=share, floors=floors)
            for share in (0.02, 0.04)
            for floors in (False, True)
        ]
        error_rates = simulate(pool, erring, runs)
        for cell, rates in zip(erring, error_rates, strict=True):
            print(
                f"  {cell.errors:.0%} errors, 100 x 4, floors {'yes' if cell.floors else 'no'}: "
                f"gate fails {rates['gate']:.1%} (a rule undecided: {rates['undecided']:.1%}); "
                f"the sign-flip test over the pairs both graded: {rates['paired only']:.1%}"
            )
        error_max = max(rates["gate"] for rates in error_rates)

        print(
            "\n4. Power: the gate fails a candidate that dropped (tau 0.5; trials of a task "
            "correlated 0.09, the setting of the earlier bench whose habit repeated with "
            "probability 0.3, unless a line says rho 0.3 or 1.0):"
        )
        drops = [
            Cell(tasks, trials, regression, floors, rho, tau=0.5, drop=drop)
            for tasks, trials, regression, floors, rho, drop in (
                (100, 4, 0, False, 0.09, 0.10),  # the target: the first line
                (100, 4, 0, False, 0.3, 0.10),
                (100, 4, 0, False, 1.0, 0.10),
                (25, 4, 0, False, 0.09, 0.10),
                (50, 4, 0, False, 0.09, 0.10),
                (50, 8, 0, False, 0.09, 0.10),
                (100, 1, 0, False, 0.09, 0.10),
                (100, 8, 0, False, 0.09, 0.10),
                (100, 8, 0, False, 0.3, 0.10),
                (100, 4, 0, False, 0.09, 0.05),
                (200, 4, 0, False, 0.09, 0.05),
                (200, 8, 0, False, 0.09, 0.05),
                (100, 4, 5, True, 0.09, 0.10),
            )
        ]
        powers = simulate(pool, drops, runs)
        for cell, rates in zip(drops, powers, strict=True):
            print(
                f"  -{cell.drop * 100:.0f} points at {cell.tasks} x {cell.trials}"
                f"{f', rho {cell.rho}' if cell.rho != 0.09 else ''}"
                f"{', 5 regression tasks and floors' if cell.regression else ''}: "
                f"{rates['gate']:.1%}"
            )
        power = powers[0]["gate"]

        print(
            f"\n5. Coverage of a run's 95% interval of its pass rate ({5 * runs} runs per cell; "
            "target 93-97% at 20 x 4 and 50 x 8); in brackets Wilson over episodes as if "
            "independent:"
        )
        grid = [
            Cell(tasks, trials, rho=rho, population=population)
            for population in POPULATIONS
            for tasks, trials in ((20, 1), (20, 4), (50, 8), (100, 4))
            for rho in (0.3, 1.0)
        ]
        covered = pool.map(coverage, [(cell, 5 * runs, 7 + i) for i, cell in enumerate(grid)])
        for cell, (held, pooled) in zip(grid, covered, strict=True):
            print(
                f"  {cell.population:>5} (rate {truth(cell.population):.0%}) {cell.tasks:>3} x "
                f"{cell.trials} rho {cell.rho}: {held:.1%} [{pooled:.1%}]"
            )
        required = [
            held
            for cell, (held, _) in zip(grid, covered, strict=True)
            if (cell.tasks, cell.trials) in ((20, 4), (50, 8))
        ]
        coverage_min = min(required)

        print("\n6. Coverage of the 95% interval of B - A (target 93-97%):")
        differences = [
            Cell(tasks, trials, **change)
            for tasks, trials in ((25, 4), (100, 4))
            for change in ({"tau": 0.5, "drop": 0.10}, {"tau": 1.0}, {"rho": 1.0, "tau": 0.5})
        ]
        spans = pool.map(
            difference_coverage, [(cell, runs // 2, 99 + i) for i, cell in enumerate(differences)]
        )
        for cell, held in zip(differences, spans, strict=True):
            print(
                f"  {cell.tasks} x {cell.trials}, drop {cell.drop:.0%}, rho {cell.rho}, "
                f"tau {cell.tau}: {held:.1%}"
            )
    print(f"\n{time.perf_counter() - started:.0f}s")
    print(
        f"gate_false_failure_max={gate_max:.4f} run_ci_coverage_min={coverage_min:.4f} "
        f"error_null_max={error_max:.4f} power_100x4={power:.4f}"
    )


if __name__ == "__main__":
    main()

"""Is every decision of the gate a test with two stated error rates, re-trials included?

Runs the product's own procedure on synthetic agents whose trials are as correlated as real
ones: the evidence loop `harness.gate.evidence.gather` (more trials of declined regression tasks
on both sides up to `max_trials`, replays of episodes without evidence, top-ups), with a player
that draws the new episodes from the same synthetic agents, then the decision
`harness.gate.evaluate_gate` (every rule together: errors, tasks, floors, worse than the
baseline, each regression-tagged task, budgets). A gate "blocks" (exit 1) when it FAILs or is
UNDECIDED (the shipped `on_undecided: fail`). Gate files are the shipped ones, read from disk:
`ci/gate.yaml`, the `harness init` scaffold's `ci/gate.yaml` (and its six tasks' levels and
tags), and the defaults (`Gate(kind="gate")`) on larger suites.

The generative model (one simulated gate = a fresh sample of tasks, both variants played):
- Task difficulty: each task's baseline pass probability comes from a population: mixed (10%
  near 0, 10% near 1, 80% Beta(2, 2)), easy, hard, or reliable (80% near 1).
- Variant-by-task interaction: the candidate's probability on a task is the baseline's shifted
  on the logit scale by a common shift plus a per-task term of standard deviation `tau`; the
  shift is calibrated so that the population mean drops by exactly `drop` points (0: a null).
- Within-task correlation: each trial of a task repeats the variant's habit on the task (one
  draw) with probability sqrt(`rho`), else draws afresh; two trials of a task are correlated
  `rho` (1: a deterministic agent). Identical variants share their habits, so their trials are
  exchangeable between the runs; a changed variant draws its own.
- A deterministic break: the candidate fails every trial of `broken` regression-tagged tasks
  whose baseline passes with probability `broken_from` (1: every trial; 0.9: each trial on its
  own, `rho` 0).
- Missing evidence: each episode that would pass is an error verdict (a judge that failed) with
  probability `errors`, on the candidate, the baseline or both (errors that hide passes: the
  worst case for a replay, which draws afresh).
- Floors, where a cell has them, sit at the population's rate: the boundary where a floor is
  hardest to hold.

Prints each table with its target; the last line is machine-readable:
gate_false_failure_max=X run_ci_coverage_min=X error_null_max=X power_100x4=X false_pass_max=X
drift_7w_shipped=X

Run: python bench/gate_power.py [simulations per cell, default 1000]
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from multiprocessing import Pool
from pathlib import Path

import interval_coverage  # bench/, beside this file
import numpy as np
import yaml

from harness.compare import GradedEpisodes
from harness.domains.support import SupportDesk
from harness.gate import evaluate_gate, load_gate_config
from harness.gate.evidence import Plan, Round, gather, record
from harness.sim.suite import TaskCase
from harness.specs.gate import Gate
from harness.specs.load import Loaded
from harness.specs.persona import Persona
from harness.specs.task import Task

ROOT = Path(__file__).resolve().parent.parent
ALPHA = 0.05
POPULATIONS = {  # (share near 0, share near 1, share in the middle), Beta of the middle
    "mixed": ((0.1, 0.1, 0.8), (2, 2)),
    "easy": ((0.02, 0.3, 0.68), (5, 2)),
    "hard": ((0.3, 0.05, 0.65), (1, 4)),
    "reliable": ((0.0, 0.8, 0.2), (5, 2)),
}
CONFIGS = ("default", "ci", "scaffold")  # the gate files the cells use


@dataclass(frozen=True)
class Cell:
    """One simulated setting of the gate."""

    tasks: int
    trials: int
    regression: int = 0  # tasks tagged regression
    floors: bool = False  # level floors at the population's rate (the default config only)
    rho: float = 0.3
    tau: float = 0.0
    drop: float = 0.0
    errors: float = 0.0  # share of would-be passes that are error verdicts (missing evidence)
    population: str = "mixed"
    own_habits: bool = False  # the candidate draws its own habits (a different variant)
    config: str = "default"  # default, ci (ci/gate.yaml) or scaffold (the scaffold's gate)
    broken: int = 0  # regression tasks the candidate fails every trial of
    broken_from: float = 1.0  # the broken tasks' baseline pass probability
    error_sides: str = "both"  # candidate, baseline or both

    @property
    def label(self) -> str:
        parts = [f"{self.config}", f"{self.tasks}x{self.trials}"]
        if self.regression:
            parts.append(f"{self.regression} regression")
        if self.floors:
            parts.append("floors")
        if self.broken:
            parts.append(f"break {self.broken} from {self.broken_from:.0%}")
        if self.drop:
            parts.append(f"-{self.drop * 100:.0f} points")
        if self.errors:
            parts.append(f"errors {self.errors:.0%} {self.error_sides}")
        parts.append(f"rho {self.rho}")
        return ", ".join(parts)


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
    """One gate run's first trials of the baseline and the candidate (None: an error)."""
    world = World(cell, rng)
    numbers = {f"t{i}": list(range(cell.trials)) for i in range(cell.tasks)}
    as_lists = [
        {task: [by_trial[t] for t in sorted(by_trial)] for task, by_trial in side.items()}
        for side in (world.episodes("baseline", numbers), world.episodes("candidate", numbers))
    ]
    return as_lists[0], as_lists[1]


class World:
    """The two variants of one simulated gate: each task's pass probability and habit on each
    side, and the episodes they give for any trial numbers asked."""

    def __init__(self, cell: Cell, rng: np.random.Generator):
        self.cell, self.rng = cell, rng
        p = difficulty(cell.tasks, rng, population(cell))
        logits = np.log(p / (1 - p))
        interaction = rng.normal(0, cell.tau, cell.tasks) if cell.tau else 0.0
        shift = calibrate(cell.tau, cell.drop, population(cell)) if cell.tau or cell.drop else 0.0
        self.p = {"baseline": p, "candidate": sigmoid(logits + interaction - shift)}
        regression = [i for i, labels in enumerate(labels_of(cell)) if "regression" in labels[1]]
        for task in regression[: cell.broken]:
            self.p["baseline"][task] = cell.broken_from
            self.p["candidate"][task] = 0.0
        habits = rng.random(cell.tasks)
        own = cell.own_habits or cell.tau or cell.drop
        self.habits = {"baseline": habits, "candidate": rng.random(cell.tasks) if own else habits}

    def episodes(
        self, side: str, trials: Mapping[str, list[int]]
    ) -> dict[str, dict[int, bool | None]]:
        """The side's outcome of each asked trial: a fresh episode (None: without evidence)."""
        cell, rng, found = self.cell, self.rng, {}
        erring = cell.errors if cell.error_sides in ("both", side) else 0.0
        for task, numbers in trials.items():
            index = int(task[1:])
            repeat = rng.random(len(numbers)) < cell.rho**0.5
            draws = np.where(repeat, self.habits[side][index], rng.random(len(numbers)))
            passed = draws < self.p[side][index]
            lost = passed & (rng.random(len(numbers)) < erring)
            found[task] = {
                t: None if missing else bool(ok)
                for t, ok, missing in zip(numbers, passed, lost, strict=True)
            }
        return found


def population(cell: Cell) -> str:
    return "reliable" if cell.config == "scaffold" else cell.population


@cache
def scaffold_labels() -> list[tuple[int, tuple[str, ...]]]:
    """The levels and tags of the `harness init` scaffold's tasks, read from its files."""
    found = []
    for path in sorted((ROOT / "harness/scaffold/project/tasks").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        found.append((int(data["level"]), tuple(data.get("tags", []))))
    return found


def labels_of(cell: Cell) -> list[tuple[int, tuple[str, ...]]]:
    """Each task's level and tags: the scaffold's own, else levels 1-3 in turn and the first
    `regression` tagged."""
    if cell.config == "scaffold":
        return scaffold_labels()
    return [(1 + i % 3, ("regression",) if i < cell.regression else ()) for i in range(cell.tasks)]


@cache
def cases(labels: tuple[tuple[int, tuple[str, ...]], ...]) -> list[TaskCase]:
    """Task cases t0, t1, ... with the given levels and tags."""
    persona = Persona.model_construct(name="user")
    found = []
    for i, (level, tags) in enumerate(labels):
        task = Task.model_validate(
            {
                "kind": "task",
                "id": f"t{i}",
                "title": f"task {i}",
                "level": level,
                "tags": list(tags),
                "domain": "support",
                "persona": "user",
                "scenario": {"reason": "synthetic"},
                "checks": [{"kind": "no_error"}],
            }
        )
        found.append(TaskCase(Loaded(task, Path(f"t{i}.yaml")), persona, SupportDesk, {}))
    return found


@cache
def shipped(config: str) -> Gate:
    if config == "ci":
        return load_gate_config(ROOT / "ci/gate.yaml")
    if config == "scaffold":
        return load_gate_config(ROOT / "harness/scaffold/project/ci/gate.yaml")
    return Gate(kind="gate")


def config(cell: Cell) -> Gate:
    """The cell's gate file; its floors at the population's rate in null cells (and in the
    default config's `floors` cells), so that each floor holds, at the boundary."""
    gate = shipped(cell.config)
    rate = round(truth(population(cell)), 4)
    if cell.config == "default":
        floors = dict.fromkeys((1, 2, 3), rate) if cell.floors else {}
    else:
        floors = {level: min(floor, rate) for level, floor in gate.level_floors.items()}
    return gate.model_copy(update={"level_floors": floors, "budgets": Gate(kind="gate").budgets})


def decide(cell: Cell, gate: Gate, rng: np.random.Generator, loop: asyncio.AbstractEventLoop):
    """One simulated gate: the first trials, the evidence loop with a player drawing from the
    same synthetic agents, the decision; and the episodes the loop played."""
    world, suite = World(cell, rng), cases(tuple(labels_of(cell)))
    first = {f"t{i}": list(range(cell.trials)) for i in range(cell.tasks)}
    candidate = GradedEpisodes.from_outcomes("c", "candidate", world.episodes("candidate", first))
    baseline = GradedEpisodes.from_outcomes("b", "baseline", world.episodes("baseline", first))
    played = [0]

    async def player(wanted: Plan, round_: int) -> Round:
        sides = []
        for side, trials in (("candidate", wanted.candidate), ("baseline", wanted.baseline)):
            played[0] += sum(len(t) for t in trials.values())
            found = world.episodes(side, trials) if trials else None
            sides.append(
                GradedEpisodes.from_outcomes(f"{side}{round_}", side, found) if found else None
            )
        return Round(record(wanted, round_, None, None), sides[0], sides[1])

    gathered = loop.run_until_complete(gather(gate, candidate, baseline, suite, player))
    result = evaluate_gate(gate, gathered.candidate, gathered.baseline, suite, figures=False)
    return result, played[0]


def gate_counts(job: tuple[Cell, int, int]) -> dict[str, float]:
    """Simulate `runs` gates of a cell: how often the gate blocked, failed, was undecided, each
    rule failed; and the extra episodes it played per gate."""
    cell, runs, seed = job
    rng, loop = np.random.default_rng(seed), asyncio.new_event_loop()
    gate = config(cell)
    counts: dict[str, float] = {"blocks": 0, "fail": 0, "undecided": 0, "extra": 0}
    for _ in range(runs):
        result, extra = decide(cell, gate, rng, loop)
        counts["blocks"] += result.blocks
        counts[result.status] = counts.get(result.status, 0) + 1
        counts["extra"] += extra
        for rule in result.rules:
            if rule.status != "pass":
                key = f"{rule.status}: {rule.rule}"
                counts[key] = counts.get(key, 0) + 1
    loop.close()
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
        total: dict[str, float] = {}
        for counts in done[c * parts : (c + 1) * parts]:
            for key, n in counts.items():
                total[key] = total.get(key, 0) + n
        rates.append({key: n / (runs // parts * parts) for key, n in total.items()})
    return rates


def table(cells: list[Cell], rates: list[dict[str, float]], what: str) -> None:
    """Each cell's share of gates that blocked (`what`: false failures or breaks caught), how
    many failed and were undecided, and the episodes the gate played per gate."""
    print(f"  {'cell':<66} {what:>8} {'fail':>6} {'undec.':>6} {'extra':>6}")
    for cell, found in zip(cells, rates, strict=True):
        print(
            f"  {cell.label:<66} {found['blocks']:>8.1%} {found.get('fail', 0):>6.1%} "
            f"{found.get('undecided', 0):>6.1%} {found['extra']:>6.1f}"
        )


def drift(job: tuple[int, int, bool, int]) -> float:
    """Share of 7-week sequences that ship the whole drift: 30 tasks x 3 trials, each week's
    candidate 3 points worse than the last shipped one, gated against the pinned production
    baseline (`pinned`) or against the last candidate that passed (the ratchet); a failed gate
    is re-run with a new candidate run up to `reruns` times."""
    runs, seed, pinned, reruns = job
    rng, loop = np.random.default_rng(seed), asyncio.new_event_loop()
    gate, suite = Gate(kind="gate"), cases(tuple((1 + i % 3, ()) for i in range(30)))
    shipped_all = 0
    for _ in range(runs):
        p = difficulty(30, rng)

        baseline, weeks = week_run(p, 0, rng), 0
        for week in range(1, 8):
            for _attempt in range(1 + reruns):
                candidate = week_run(p, week, rng)
                gathered = loop.run_until_complete(gather(gate, candidate, baseline, suite, None))
                result = evaluate_gate(
                    gate, gathered.candidate, gathered.baseline, suite, figures=False
                )
                if not result.blocks:
                    break
            if result.blocks:
                break
            weeks += 1
            if not pinned:
                baseline = candidate
        shipped_all += weeks == 7
    loop.close()
    return shipped_all / runs


def week_run(p: np.ndarray, week: int, rng: np.random.Generator) -> GradedEpisodes:
    """A run of 30 tasks x 3 trials by the candidate of a week: 3 points worse a week."""
    logits = np.log(p / (1 - p))
    chance = sigmoid(logits - calibrate(0.0, 0.03 * week)) if week else p
    name = f"week {week}"
    return GradedEpisodes.from_outcomes(name, name, outcomes(play(chance, 3, 0.3, rng)))


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    started = time.perf_counter()
    noise = (ALPHA * (1 - ALPHA) / runs) ** 0.5
    print(
        f"{runs} simulated gates per cell, each the whole procedure (harness.gate.evidence."
        f"gather, then harness.gate.evaluate_gate); Monte Carlo standard error of a 5% rate: "
        f"{noise:.1%}; a gate blocks when it FAILs or is UNDECIDED\n"
    )
    with Pool(2) as pool:
        print("1. False failures: identical variants (target <= 5% blocked in every cell)")
        nulls = [
            *(
                Cell(6, trials, config="scaffold", rho=rho)
                for trials in (1, 3)
                for rho in (0.3, 1.0)
            ),
            *(
                Cell(tasks, trials, 5, config="ci", population="easy", rho=rho)
                for tasks in (20, 50)
                for trials in (1, 3)
                for rho in (0.0, 0.3)
            ),
            *(
                Cell(tasks, trials, regression, floors, rho)
                for tasks in (20, 50)
                for trials in (1, 2, 3)
                for regression, floors in ((5, False), (5, True), (20, True))
                for rho in (0.0, 0.3)
                if regression < tasks
            ),
        ]
        found = simulate(pool, nulls, runs)
        table(nulls, found, "blocks")
        gate_max = max(rates["blocks"] for rates in found)
        print(f"  worst false-failure rate: {gate_max:.1%}\n")

        print("2. The worse-than-baseline rule under other nulls (target <= 5%):")
        others = [
            Cell(tasks, trials, rho=rho, tau=tau, own_habits=True)
            for tasks, trials in ((25, 4), (100, 4))
            for rho, tau in ((0.3, 0.0), (0.3, 1.0), (1.0, 0.0))
        ]
        for cell, rates in zip(others, simulate(pool, others, runs), strict=True):
            worse = rates.get("fail: worse than the baseline", 0.0)
            print(f"  {cell.tasks} x {cell.trials}, rho {cell.rho}, tau {cell.tau}: {worse:.1%}")

        print(
            "\n3. Missing evidence on identical variants (a judge failing on 4% of would-be "
            "passes, played again where it could change the decision; target <= 5% blocked):"
        )
        erring = [
            Cell(tasks, trials, 5, errors=0.04, error_sides=sides, config=name, population=pop)
            for tasks, trials in ((50, 3), (20, 1))
            for sides in ("candidate", "both")
            for name, pop in (("default", "mixed"), ("ci", "easy"))
        ]
        error_rates = simulate(pool, erring, runs)
        table(erring, error_rates, "blocks")
        error_max = max(rates["blocks"] for rates in error_rates)

        print(
            "\n4. False passes: a candidate that breaks regression tasks, fails every trial of "
            "them (target: caught >= 95% in every cell)"
        )
        breaks = [
            *(
                Cell(6, trials, config="scaffold", broken=broken, rho=rho, broken_from=level)
                for trials in (1, 3)
                for broken in (1, 2)
                for level, rho in ((1.0, 1.0), (0.9, 0.0))
            ),
            *(
                Cell(tasks, trials, 5, config=name, population=pop, broken=broken, **start)
                for tasks in (20, 50)
                for trials in (1, 3)
                for broken in (1, 2, 5)
                for start in ({"broken_from": 1.0}, {"broken_from": 0.9, "rho": 0.0})
                for name, pop in (("default", "mixed"), ("ci", "easy"))
            ),
        ]
        break_rates = simulate(pool, breaks, runs)
        table(breaks, break_rates, "caught")
        deterministic = [
            1 - rates["blocks"]
            for cell, rates in zip(breaks, break_rates, strict=True)
            if cell.broken_from == 1.0
        ]
        false_pass_max = max(deterministic)
        at_90 = max(
            1 - rates["blocks"]
            for cell, rates in zip(breaks, break_rates, strict=True)
            if cell.broken_from < 1
        )
        print(
            f"  worst false-pass rate: {false_pass_max:.1%} (breaks from 100%), {at_90:.1%} "
            "(from 90%)"
        )

        print("\n5. Drops and errors that would hide them (power; tau 0.5, rho 0.09 unless said):")
        drops = [
            Cell(100, 4, rho=0.09, tau=0.5, drop=0.10),  # the earlier bench's target line
            *(
                Cell(tasks, trials, 5, config=name, population=pop, rho=0.09, tau=0.5, drop=drop)
                for tasks in (20, 50)
                for trials in (1, 3)
                for drop in (0.10, 0.20)
                for name, pop in (("default", "mixed"), ("ci", "easy"))
            ),
            *(
                Cell(50, 3, 5, rho=0.09, tau=0.5, drop=0.10, errors=0.04, error_sides=sides)
                for sides in ("candidate", "both")
            ),
            *(  # sizing a suite: how many tasks and trials a drop needs
                Cell(tasks, trials, rho=0.09, tau=0.5, drop=drop)
                for tasks, trials, drop in (
                    (25, 4, 0.10),
                    (50, 4, 0.10),
                    (50, 8, 0.10),
                    (100, 1, 0.10),
                    (100, 8, 0.10),
                    (100, 4, 0.05),
                    (200, 8, 0.05),
                )
            ),
            Cell(50, 3, 5, rho=0.09, tau=0.5, drop=0.10, errors=0.04, error_sides="baseline"),
        ]
        powers = simulate(pool, drops, runs)
        table(drops, powers, "caught")
        power = powers[0]["blocks"]

        print("\n6. Repeated looks: 7 weekly candidates, each 3 points worse (30 tasks x 3):")
        shares = pool.map(
            drift,
            [
                (runs // 4, 7 + k, pinned, reruns)
                for pinned in (True, False)
                for reruns in (0, 2)
                for k in range(2)
            ],
        )
        by = {}
        for i, (pinned, reruns) in enumerate((p, r) for p in (True, False) for r in (0, 2)):
            by[(pinned, reruns)] = (shares[2 * i] + shares[2 * i + 1]) / 2
            baseline = "the pinned production baseline" if pinned else "the last that passed"
            print(
                f"  against {baseline}, failed gates re-run {reruns} times: "
                f"{by[(pinned, reruns)]:.1%} of sequences ship the whole -21 points"
            )
        drift_shipped = by[(True, 0)]

        print(
            "\n7. Coverage of the 95% intervals every printer shows (bench/interval_coverage.py's "
            "regimes, rare failures and breaks among few tasks included; target >= 93%):"
        )
        runs_covered = interval_coverage.run_interval_coverage(
            interval_coverage.RUN_REGIMES, runs, pool
        )
        for regime, found in zip(interval_coverage.RUN_REGIMES, runs_covered, strict=True):
            print(f"  run rate, {regime.label}: {found.coverage:.1%}")
        spans = interval_coverage.difference_interval_coverage(
            interval_coverage.DIFFERENCE_REGIMES, runs, pool
        )
        for regime, found in zip(interval_coverage.DIFFERENCE_REGIMES, spans, strict=True):
            print(f"  B - A, {regime.label}: {found.coverage:.1%}")
        coverage_min = min(found.coverage for found in runs_covered)
    print(f"\n{time.perf_counter() - started:.0f}s")
    print(
        f"gate_false_failure_max={gate_max:.4f} run_ci_coverage_min={coverage_min:.4f} "
        f"error_null_max={error_max:.4f} power_100x4={power:.4f} "
        f"false_pass_max={false_pass_max:.4f} drift_7w_shipped={drift_shipped:.4f}"
    )


if __name__ == "__main__":
    main()

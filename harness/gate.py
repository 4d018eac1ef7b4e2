"""The regression gate: may a candidate run replace the baseline? Every failed rule is named."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from statistics import mean, quantiles
from typing import Any

from pydantic import BaseModel, Field

from harness.compare import ComparisonResult, GradedEpisodes, compare_episodes, paired_keys
from harness.sim.suite import TaskCase
from harness.specs.gate import Gate
from harness.specs.load import load_spec
from harness.stats import mcnemar_exact, wilson_interval
from harness.store import Store


class LevelFigures(BaseModel):
    """The candidate's pass rate on the tasks of one level, against that level's floor."""

    rate: float = Field(description="Share of the level's graded episodes that passed.")
    n: int = Field(description="Graded episodes of the level.")
    low: float = Field(description="Lower end of the 95% Wilson interval.")
    high: float = Field(description="Upper end of the 95% Wilson interval.")
    floor: float = Field(description="The lowest pass rate the gate allows.")


class BudgetFigures(BaseModel):
    """The candidate's spend, measured against the gate's budgets."""

    cost_usd_per_episode: float = Field(description="Mean cost per episode, agent and user.")
    latency_s_p95: float = Field(description="95th-percentile episode wall time in seconds.")


class GateResult(BaseModel):
    """The gate's decision, each failed rule as one line, and the figures behind it."""

    passed: bool = Field(description="True when no rule of the gate failed.")
    reasons: list[str] = Field(description="Every rule that failed, one line each.")
    candidate_run: str = Field(description="The run the gate judged.")
    candidate_variant: str = Field(description="The candidate's agent variant name.")
    baseline_run: str | None = Field(description="The run it was compared with, if any.")
    levels: dict[int, LevelFigures] = Field(
        default_factory=dict, description="Pass rate per level that has a floor."
    )
    comparison: ComparisonResult | None = Field(
        default=None, description="The candidate against the baseline, when there is one."
    )
    budgets: BudgetFigures = Field(description="The candidate's cost and latency.")
    failing_tasks: dict[str, list[str]] = Field(
        default_factory=dict, description="Regressed tasks and why each fails the gate."
    )


def load_gate_config(path: str | Path) -> Gate:
    """The gate's thresholds file, validated."""
    spec = load_spec(Path(path)).spec
    assert isinstance(spec, Gate)
    return spec


def _graded(side: GradedEpisodes) -> dict[str, list[bool]]:
    """Pass/fail per task, errors left out."""
    return side.outcomes(key for key in side.rows if side.outcome(key) != "error")


def worse_than_baseline(
    baseline: Sequence[bool], candidate: Sequence[bool], alpha: float
) -> tuple[bool, float]:
    """The gate's significance rule on paired outcomes (same task, trial and seed on both
    sides): a one-sided exact McNemar test that the candidate is worse, at `alpha`.
    `bench/gate_power.py` measures its false-alarm rate and power."""
    p_value = mcnemar_exact(baseline, candidate, alternative="less").p_value
    return p_value < alpha, p_value


def _level_floors(
    config: Gate, outcomes: dict[str, list[bool]], cases: list[TaskCase], reasons: list[str]
) -> dict[int, LevelFigures]:
    """Each level's pass rate against its floor; a rate below it adds a reason."""
    tasks = {case.task.id: case.task for case in cases}
    levels: dict[int, LevelFigures] = {}
    for level, floor in sorted(config.level_floors.items()):
        flat = [
            o
            for t, trials in outcomes.items()
            if tasks.get(t) and tasks[t].level == level
            for o in trials
        ]
        if not flat:
            continue
        rate = sum(flat) / len(flat)
        low, high = wilson_interval(sum(flat), len(flat))
        levels[level] = LevelFigures(rate=rate, n=len(flat), low=low, high=high, floor=floor)
        if rate < floor:
            reasons.append(
                f"level {level}: pass rate {rate:.1%} ({sum(flat)}/{len(flat)}) is "
                f"below the floor of {floor:.0%}"
            )
    return levels


def _regressions(
    config: Gate,
    candidate: GradedEpisodes,
    baseline: GradedEpisodes,
    cases: list[TaskCase],
    reasons: list[str],
) -> tuple[ComparisonResult, dict[str, list[str]]]:
    """The paired test against the baseline and the regression-suite tasks now failing every
    trial; each failed rule adds a reason."""
    comparison = compare_episodes(baseline, candidate, cases)
    keys, _ = paired_keys(baseline, candidate)
    worse, p_value = worse_than_baseline(
        [baseline.passed(k) for k in keys], [candidate.passed(k) for k in keys], config.alpha
    )
    if worse:
        test = comparison.mcnemar
        reasons.append(
            f"worse than the baseline: pass rate {comparison.a.rate:.1%} -> "
            f"{comparison.b.rate:.1%} ({test.a_only} episodes lost, "
            f"{test.b_only} won; one-sided exact McNemar p = {p_value:.4f} "
            f"< alpha {config.alpha:g})"
        )
    tasks = {case.task.id: case.task for case in cases}
    outcomes, before = _graded(candidate), _graded(baseline)
    tagged = sorted(
        t for t in outcomes if tasks.get(t) and set(tasks[t].tags) & set(config.regression_tags)
    )
    regressed = [
        t for t in tagged if t in before and mean(before[t]) >= 0.5 and not any(outcomes[t])
    ]
    if regressed:
        reasons.append(
            f"regression suite: {', '.join(regressed)} passed on the baseline and "
            "fail in every trial now"
        )
    failing = {t: ["passed on the baseline, fails every trial now"] for t in regressed}
    return comparison, failing


def _budgets(config: Gate, candidate: GradedEpisodes, reasons: list[str]) -> BudgetFigures:
    """The candidate's mean cost and 95th-percentile time; a budget exceeded adds a reason."""
    rows = list(candidate.rows.values())
    cost = mean(r.usage.cost_usd + r.user_usage.cost_usd for r in rows) if rows else 0.0
    durations = sorted(r.duration_s for r in rows)
    p95 = (
        quantiles(durations, n=20, method="inclusive")[-1]
        if len(durations) > 1
        else (durations[0] if durations else 0.0)
    )
    budgets = config.budgets
    if budgets.cost_usd_per_episode is not None and cost > budgets.cost_usd_per_episode:
        reasons.append(
            f"cost ${cost:.4f} per episode is over the budget of ${budgets.cost_usd_per_episode:g}"
        )
    if budgets.latency_s_p95 is not None and p95 > budgets.latency_s_p95:
        reasons.append(
            f"95th-percentile episode time {p95:.1f}s is over the budget of "
            f"{budgets.latency_s_p95:g}s"
        )
    return BudgetFigures(cost_usd_per_episode=cost, latency_s_p95=p95)


def evaluate_gate(
    config: Gate,
    candidate: GradedEpisodes,
    baseline: GradedEpisodes | None,
    cases: list[TaskCase],
) -> GateResult:
    """Apply every rule of the gate. Without a baseline only floors and budgets apply."""
    reasons: list[str] = []
    levels = _level_floors(config, _graded(candidate), cases, reasons)
    comparison, failing = None, {}
    if baseline is not None:
        comparison, failing = _regressions(config, candidate, baseline, cases, reasons)
    budgets = _budgets(config, candidate, reasons)
    return GateResult(
        passed=not reasons,
        reasons=reasons,
        candidate_run=candidate.run_id,
        candidate_variant=candidate.variant,
        baseline_run=baseline.run_id if baseline else None,
        levels=levels,
        comparison=comparison,
        budgets=budgets,
        failing_tasks=failing,
    )


def gate_run(
    store: Store, config: Gate, candidate_run: str, baseline_run: str | None, cases: list[TaskCase]
) -> GateResult:
    """Judge a stored candidate run against a stored baseline run, and append the decision to
    the store's gate history. The one gate decision, for the `gate` node and command alike."""
    candidate = GradedEpisodes.load(store, candidate_run)
    baseline = GradedEpisodes.load(store, baseline_run) if baseline_run else None
    result = evaluate_gate(config, candidate, baseline, cases)
    graded = [key for key in candidate.rows if candidate.outcome(key) != "error"]
    rate = sum(candidate.passed(key) for key in graded) / len(graded) if graded else 0.0
    store.add_gate_result(
        candidate_run, baseline_run, candidate.variant, result.passed, rate, result.reasons
    )
    return result


@dataclass
class GateWeek:
    """The gate decisions on one variant's runs in one ISO week."""

    variant: str
    week: str  # e.g. 2026-W07
    decisions: int
    passed: int
    mean_rate: float  # the candidates' mean pass rate
    first_rate: float
    last_rate: float


def gate_trend(store: Store) -> list[GateWeek]:
    """The pass-rate trend of gated runs from the gate history, per variant and week."""
    weeks: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in store.gate_history():
        year, week, _ = datetime.fromisoformat(row["at"]).isocalendar()
        weeks[(row["variant"], f"{year}-W{week:02d}")].append(row)
    trend = []
    for (variant, week), entries in sorted(weeks.items()):
        rates = [e["pass_rate"] for e in entries]
        passed = sum(e["passed"] for e in entries)
        mean_rate = sum(rates) / len(rates)
        trend.append(GateWeek(variant, week, len(entries), passed, mean_rate, rates[0], rates[-1]))
    return trend

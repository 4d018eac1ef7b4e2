"""The regression gate: may a candidate run replace the baseline? Every failed rule is named."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import mean, quantiles
from typing import Any

from harness.compare import Side, compare_sides, paired_keys
from harness.sim.suite import TaskCase
from harness.specs.gate import Gate
from harness.stats import mcnemar_exact, wilson_interval
from harness.store import Store


@dataclass
class GateResult:
    """The decision, each failed rule as one line, and the figures behind it."""

    passed: bool
    reasons: list[str]
    details: dict[str, Any] = field(default_factory=dict)
    failing_tasks: dict[str, list[str]] = field(default_factory=dict)  # task -> why (for JUnit)


def _graded(side: Side) -> dict[str, list[bool]]:
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


def evaluate_gate(
    config: Gate, candidate: Side, baseline: Side | None, cases: list[TaskCase]
) -> GateResult:
    """Apply every rule of the gate. Without a baseline only floors and budgets apply."""
    tasks = {case.task.id: case.task for case in cases}
    outcomes = _graded(candidate)
    reasons: list[str] = []
    details: dict[str, Any] = {"levels": {}}
    failing: dict[str, list[str]] = {}

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
        details["levels"][level] = {
            "rate": rate,
            "n": len(flat),
            "low": low,
            "high": high,
            "floor": floor,
        }
        if rate < floor:
            reasons.append(
                f"level {level}: pass rate {rate:.1%} ({sum(flat)}/{len(flat)}) is "
                f"below the floor of {floor:.0%}"
            )

    if baseline is not None:
        comparison = compare_sides(baseline, candidate, cases)
        details["comparison"] = comparison
        keys, _ = paired_keys(baseline, candidate)
        worse, p_value = worse_than_baseline(
            [baseline.passed(k) for k in keys], [candidate.passed(k) for k in keys], config.alpha
        )
        if worse:
            test = comparison["mcnemar"]
            reasons.append(
                f"worse than the baseline: pass rate {comparison['a']['rate']:.1%} -> "
                f"{comparison['b']['rate']:.1%} ({test['a_only']} episodes lost, "
                f"{test['b_only']} won; one-sided exact McNemar p = {p_value:.4f} "
                f"< alpha {config.alpha:g})"
            )
        before = _graded(baseline)
        tagged = sorted(
            t for t in outcomes if tasks.get(t) and set(tasks[t].tags) & set(config.regression_tags)
        )
        regressed = [
            t for t in tagged if t in before and mean(before[t]) >= 0.5 and not any(outcomes[t])
        ]
        for task_id in regressed:
            failing[task_id] = ["passed on the baseline, fails every trial now"]
        if regressed:
            reasons.append(
                f"regression suite: {', '.join(regressed)} passed on the baseline and "
                "fail in every trial now"
            )

    rows = list(candidate.rows.values())
    cost = mean(r.usage.cost_usd + r.user_usage.cost_usd for r in rows) if rows else 0.0
    durations = sorted(r.duration_s for r in rows)
    p95 = (
        quantiles(durations, n=20, method="inclusive")[-1]
        if len(durations) > 1
        else (durations[0] if durations else 0.0)
    )
    details["budgets"] = {"cost_usd_per_episode": cost, "latency_s_p95": p95}
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
    return GateResult(passed=not reasons, reasons=reasons, details=details, failing_tasks=failing)


def gate_run(
    store: Store, config: Gate, candidate_run: str, baseline_run: str | None, cases: list[TaskCase]
) -> GateResult:
    """Judge a stored candidate run against a stored baseline run, and append the decision to
    the store's gate history."""
    candidate = Side.load(store, candidate_run)
    baseline = Side.load(store, baseline_run) if baseline_run else None
    result = evaluate_gate(config, candidate, baseline, cases)
    graded = [key for key in candidate.rows if candidate.outcome(key) != "error"]
    rate = sum(candidate.passed(key) for key in graded) / len(graded) if graded else 0.0
    store.add_gate_result(
        candidate_run, baseline_run, candidate.variant, result.passed, rate, result.reasons
    )
    return result

"""The regression gate: may a candidate run replace the baseline? It decides only on evidence,
with the task as the unit of its test; every rule is reported with its figures, failed or not."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from harness.compare import ComparisonResult, GradedEpisodes, compare_episodes, paired_keys
from harness.gate.family import Sides, family
from harness.gate.figures import (
    BudgetFigures,
    LevelFigures,
    RuleCheck,
    RunErrors,
    SuiteFigures,
)
from harness.gate.history import GateWeek, gate_trend
from harness.gate.judges import judge_rule
from harness.gate.rules import (
    budget_rules,
    error_rule,
    floor_figures,
    regression_error_rule,
    run_errors,
    statistical_rules,
    task_count_rule,
)
from harness.gate.suites import check_suites, compare_suites, run_suite
from harness.specs.gate import Gate
from harness.specs.load import load_spec
from harness.stats import run_rate
from harness.store import PlayedTask, Store

__all__ = [
    "BudgetFigures",
    "GateResult",
    "GateWeek",
    "LevelFigures",
    "RuleCheck",
    "RunErrors",
    "SuiteFigures",
    "evaluate_gate",
    "gate_run",
    "gate_trend",
    "load_gate_config",
    "readings",
]


class GateResult(BaseModel):
    """The gate's decision, each failed rule as one line, every rule checked, and the figures."""

    passed: bool = Field(description="True when no rule of the gate failed.")
    reasons: list[str] = Field(description="Every rule that failed, one line each.")
    rules: list[RuleCheck] = Field(
        default_factory=list, description="Every rule checked, passed or failed, in order."
    )
    candidate_run: str = Field(description="The run the gate judged.")
    candidate_variant: str = Field(description="The candidate's agent variant name.")
    baseline_run: str | None = Field(description="The run it was compared with, if any.")
    notes: list[str] = Field(
        default_factory=list, description="Which runs were compared and how they were chosen."
    )
    suite: SuiteFigures | None = Field(
        default=None, description="How the two runs' suites compare, when there is a baseline."
    )
    errors: list[RunErrors] = Field(
        default_factory=list, description="Episodes without complete evidence, per run."
    )
    tasks: int = Field(default=0, description="Tasks graded (on both sides with a baseline).")
    levels: dict[int, LevelFigures] = Field(
        default_factory=dict, description="Graded pass rate per level that has a floor."
    )
    tag_floors: dict[str, LevelFigures] = Field(
        default_factory=dict, description="Graded pass rate per tag that has a floor."
    )
    comparison: ComparisonResult | None = Field(
        default=None, description="The candidate against the baseline, when there is one."
    )
    budgets: BudgetFigures = Field(description="The candidate's cost and latency.")
    failing_tasks: dict[str, list[str]] = Field(
        default_factory=dict, description="Regressed tasks and why each fails the gate."
    )

    def _repr_html_(self) -> str:
        """The decision in a notebook: passed or failed, and each failed rule."""
        against = f" against {self.baseline_run}" if self.baseline_run else ""
        head = f"gate {'passed' if self.passed else 'failed'}: {self.candidate_run}{against}"
        items = "".join(f"<li>{html.escape(reason)}</li>" for reason in self.reasons)
        return f"<b>{html.escape(head)}</b>" + (f"<ul>{items}</ul>" if items else "")


def load_gate_config(path: str | Path) -> Gate:
    """The gate's thresholds file, validated."""
    spec = load_spec(Path(path)).spec
    assert isinstance(spec, Gate)
    return spec


def readings(
    candidate: GradedEpisodes, baseline: GradedEpisodes | None
) -> tuple[Sides, Sides | None]:
    """The outcomes the statistical rules are tested on: with missing evidence counted in the
    candidate's favour (its errors as passes, the baseline's as fails), and, when anything is
    missing, the other way round."""
    own = candidate.keys()
    shared = own & baseline.keys() if baseline is not None else set()

    def reading(candidate_errors_pass: bool) -> Sides:
        paired = None
        if baseline is not None:
            before = baseline.imputed(shared, not candidate_errors_pass)
            paired = (before, candidate.imputed(shared, candidate_errors_pass))
        return Sides(candidate.imputed(own, candidate_errors_pass), paired)

    missing = any(candidate.missing(k) for k in own) or any(baseline.missing(k) for k in shared)
    return reading(True), reading(False) if missing else None


def evaluate_gate(
    config: Gate,
    candidate: GradedEpisodes,
    baseline: GradedEpisodes | None,
    cases: Sequence[PlayedTask],
) -> GateResult:
    """Apply every rule of the gate. Without a baseline the comparison rules cannot apply: only
    the error, task-count, floor and budget rules do (and the report says so). The statistical
    rules are one family: a candidate identical to the baseline fails any of them with
    probability at most `config.alpha` (`harness.gate.family`; `bench/gate_power.py`)."""
    sides = [(candidate, "candidate"), *([(baseline, "baseline")] if baseline else [])]
    errors = [run_errors(side, role) for side, role in sides]  # type: ignore[arg-type]
    rules = [error_rule(config, figures) for figures in errors]
    rules.append(regression_error_rule(config, sides, cases))
    graded_candidate = candidate.graded_outcomes()
    if baseline is not None:
        tasks = len({task for task, _ in paired_keys(baseline, candidate)[0]})
    else:
        tasks = sum(1 for trials in graded_candidate.values() if trials)
    rules.append(task_count_rule(config, tasks, baseline is not None))
    comparison = None
    if baseline is not None:
        comparison = compare_episodes(
            baseline, candidate, cases, config.alpha, config.max_error_rate
        )
    favoured, other = readings(candidate, baseline)
    floors = floor_figures(config, graded_candidate, cases)
    tested, failing = statistical_rules(
        config,
        family(config, favoured, cases),
        family(config, other, cases) if other is not None else None,
        floors,
        cases,
        comparison,
    )
    rules += tested
    budgets, spend = budget_rules(config, candidate)
    rules += spend
    reasons = [rule.detail for rule in rules if not rule.passed]
    return GateResult(
        passed=not reasons,
        reasons=reasons,
        rules=rules,
        candidate_run=candidate.run_id,
        candidate_variant=candidate.variant,
        baseline_run=baseline.run_id if baseline else None,
        errors=errors,
        tasks=tasks,
        levels={int(k.split()[1]): v for k, v in floors.items() if k.startswith("level ")},
        tag_floors={k.split(" ", 1)[1]: v for k, v in floors.items() if k.startswith("tag ")},
        comparison=comparison,
        budgets=budgets,
        failing_tasks=failing,
    )


def gate_run(
    store: Store,
    config: Gate,
    candidate_run: str,
    baseline_run: str | None,
    cases: Sequence[PlayedTask],
    allow_suite_change: bool = False,
    notes: Sequence[str] = (),
) -> GateResult:
    """Judge a stored candidate run against a stored baseline run, and append the decision to
    the store's gate history. The one gate decision, for the `gate` node and command alike.

    Runs of different suites (task ids and content hashes) are refused, unless
    `allow_suite_change`: then only the tasks both played in the same content count."""
    candidate = GradedEpisodes.load(store, candidate_run)
    baseline = GradedEpisodes.load(store, baseline_run) if baseline_run else None
    suite, notes = None, list(notes)
    if baseline is not None:
        infos = [store.run(run_id) for run_id in (baseline.run_id, candidate.run_id)]
        assert infos[0] is not None and infos[1] is not None  # loaded above
        suite = compare_suites(run_suite(store, infos[0]), run_suite(store, infos[1]))
        notes += check_suites(suite, allow_suite_change, str(store.path))
        if not suite.same:
            common = set(suite.common)
            candidate, baseline = candidate.only_tasks(common), baseline.only_tasks(common)
            cases = [case for case in cases if case.task.id in common]
    result = evaluate_gate(config, candidate, baseline, cases)
    result.notes, result.suite = notes, suite
    judged = judge_rule(config, store, [r for r in (candidate_run, baseline_run) if r])
    if judged is not None:
        result.rules.append(judged)
        if not judged.passed:
            result.reasons.append(judged.detail)
            result.passed = False
    rate = run_rate(candidate.graded_outcomes()).estimate
    store.add_gate_result(
        candidate_run, baseline_run, candidate.variant, result.passed, rate, result.reasons
    )
    return result

"""The gate's rules. Each returns its `RuleCheck` (passed or not, with its figures), so a report
lists every rule, and a rule never passes on missing evidence: errors are counted per run, a
regression task without evidence fails, too few tasks fail, an unpriced model fails a budget."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from statistics import mean, quantiles
from typing import Literal

from harness.compare import ComparisonResult, GradedEpisodes
from harness.gate.figures import BudgetFigures, LevelFigures, RuleCheck, RunErrors
from harness.sim.suite import TaskCase
from harness.specs.gate import Gate
from harness.stats import (
    Outcomes,
    lattice_scale,
    sign_flip_test,
    task_differences,
    task_wilson_interval,
)


def graded(side: GradedEpisodes) -> dict[str, list[bool]]:
    """Pass/fail per task, errors left out."""
    return side.outcomes(key for key in side.rows if side.outcome(key) != "error")


def worse_than_baseline(
    baseline: Outcomes, candidate: Outcomes, alpha: float
) -> tuple[bool, float]:
    """The gate's significance rule, the task as the unit: a one-sided sign-flip permutation
    test (exact when the rates sit on a lattice, as pass rates of whole trials do) that the
    candidate's per-task pass rates are lower, at `alpha`. Both sides hold the same tasks with
    their paired trials. `bench/gate_power.py` measures its false alarms and power."""
    differences = task_differences(baseline, candidate)
    scale = lattice_scale([*baseline.values(), *candidate.values()])
    p_value = sign_flip_test(differences, scale).p_less
    return p_value < alpha, p_value


def run_errors(side: GradedEpisodes, role: Literal["candidate", "baseline"]) -> RunErrors:
    """The run's episodes without complete evidence, by the side that failed."""
    by_side: Counter[str] = Counter()
    errors = soft = 0
    for row in side.rows.values():
        verdict = row.verdict
        assert verdict is not None  # only graded episodes are loaded
        undecided = verdict.soft_errors()
        if verdict.outcome == "error":
            errors += 1
            by_side[verdict.error_side.value if verdict.error_side else "unknown"] += 1
        elif undecided:
            soft += 1
            first = undecided[0].error_side
            by_side[f"{first.value if first else 'unknown'} (soft check)"] += 1
    if side.ungraded:
        by_side["ungraded"] = len(side.ungraded)
    episodes = len(side.rows) + len(side.ungraded)
    missing = errors + soft + len(side.ungraded)
    return RunErrors(
        run_id=side.run_id,
        role=role,
        episodes=episodes,
        errors=errors,
        ungraded=len(side.ungraded),
        soft_errors=soft,
        by_side=dict(sorted(by_side.items())),
        rate=missing / episodes if episodes else 0.0,
    )


def error_rule(config: Gate, figures: RunErrors) -> RuleCheck:
    """A run may hold at most `max_error_rate` of episodes without complete evidence."""
    missing = figures.errors + figures.soft_errors + figures.ungraded
    sides = ", ".join(f"{side} {n}" for side, n in figures.by_side.items()) or "none"
    over = figures.rate > config.max_error_rate
    return RuleCheck(
        rule=f"errors ({figures.role})",
        passed=not over,
        detail=f"errors: {figures.role} run {figures.run_id}: {missing}/{figures.episodes} "
        f"episodes without complete evidence ({figures.rate:.1%}; {figures.errors} error "
        f"verdicts, {figures.soft_errors} with an undecided soft check, {figures.ungraded} "
        f"ungraded; by side: {sides}) {'is over' if over else 'is within'} the limit of "
        f"{config.max_error_rate:.0%}",
    )


def _regression_problems(side: GradedEpisodes, role: str, tagged: set[str]) -> Iterator[str]:
    """Each regression-tagged episode without evidence: an error verdict, no verdict, or a hard
    check that could not decide (even under a failed one)."""
    for task, trial in side.ungraded:
        if task in tagged:
            yield f"{task} ({role} trial {trial}: not graded)"
    for (task, trial), row in sorted(side.rows.items()):
        verdict = row.verdict
        if task not in tagged or verdict is None:
            continue
        undecided = [c for c in verdict.checks if c.gates and c.outcome == "error"]
        if verdict.outcome == "error" or undecided:
            failed = verdict.error_side or (undecided[0].error_side if undecided else None)
            what = ", ".join(f"'{c.name}'" for c in undecided) or "the episode"
            who = failed.value if failed else "unknown"
            yield f"{task} ({role} trial {trial}: {who} error on {what})"


def regression_error_rule(
    config: Gate, sides: list[tuple[GradedEpisodes, str]], cases: list[TaskCase]
) -> RuleCheck:
    """Any error on a hard check of a regression-tagged task fails the gate."""
    tagged = {c.task.id for c in cases if set(c.task.tags) & set(config.regression_tags)}
    problems = [p for side, role in sides for p in _regression_problems(side, role, tagged)]
    if problems:
        detail = (
            f"regression errors: {'; '.join(problems)}: a regression-tagged task without "
            "evidence cannot pass"
        )
    else:
        detail = f"regression errors: none on the {len(tagged)} regression-tagged tasks"
    return RuleCheck(rule="regression errors", passed=not problems, detail=detail)


def task_count_rule(config: Gate, tasks: int, paired: bool) -> RuleCheck:
    """Too few graded tasks and no test could find a drop: the gate needs `min_tasks`."""
    where = "graded on both sides" if paired else "graded on the candidate"
    enough = tasks >= config.min_tasks
    return RuleCheck(
        rule="tasks",
        passed=enough,
        detail=f"tasks: {tasks} {where}, {'at least' if enough else 'fewer than'} the minimum "
        f"of {config.min_tasks}",
    )


def level_rules(
    config: Gate, outcomes: dict[str, list[bool]], cases: list[TaskCase]
) -> tuple[dict[int, LevelFigures], list[RuleCheck]]:
    """Each level's pass rate (the mean of its tasks' rates) against its floor. A level the
    suite has but whose every episode errored fails: its floor cannot be shown to hold."""
    levels: dict[int, LevelFigures] = {}
    checks = []
    for level, floor in sorted(config.level_floors.items()):
        ids = {c.task.id for c in cases if c.task.level == level}
        if not ids:
            continue
        chosen = {t: trials for t, trials in outcomes.items() if t in ids and trials}
        if not chosen:
            detail = f"level {level}: no graded episode on its {len(ids)} tasks"
            checks.append(RuleCheck(rule=f"level {level}", passed=False, detail=detail))
            continue
        interval = task_wilson_interval(chosen)
        flat = [o for trials in chosen.values() for o in trials]
        levels[level] = LevelFigures(
            rate=interval.estimate,
            n=len(flat),
            tasks=len(chosen),
            low=interval.low,
            high=interval.high,
            floor=floor,
        )
        below = interval.estimate < floor
        checks.append(
            RuleCheck(
                rule=f"level {level}",
                passed=not below,
                detail=f"level {level}: pass rate {interval.estimate:.1%} ({sum(flat)}/"
                f"{len(flat)}, {len(chosen)} tasks) is {'below' if below else 'at or above'} "
                f"the floor of {floor:.0%}",
            )
        )
    return levels, checks


def worse_rule(config: Gate, comparison: ComparisonResult, p_value: float) -> RuleCheck:
    """The candidate may not be significantly worse than the baseline, tasks as the unit."""
    d = comparison.tasks
    worse = p_value < config.alpha
    figures = (
        f"pass rate {comparison.a.rate:.1%} -> {comparison.b.rate:.1%} (task-clustered "
        f"difference {d.difference:+.1%}, 95% CI {d.low:+.1%} to {d.high:+.1%}; "
        f"{d.worse_tasks} of {d.tasks} tasks worse, {d.better_tasks} better; one-sided "
        f"sign-flip p = {p_value:.4f}"
    )
    detail = (
        f"worse than the baseline: {figures} < alpha {config.alpha:g})"
        if worse
        else f"not worse than the baseline: {figures}, not below alpha {config.alpha:g})"
    )
    return RuleCheck(rule="worse than the baseline", passed=not worse, detail=detail)


def regression_suite_rule(
    config: Gate, candidate: GradedEpisodes, baseline: GradedEpisodes, cases: list[TaskCase]
) -> tuple[RuleCheck, dict[str, list[str]]]:
    """A regression-tagged task that passed on the baseline may not fail every trial now."""
    tasks = {case.task.id: case.task for case in cases}
    outcomes, before = graded(candidate), graded(baseline)
    tagged = sorted(
        t for t in outcomes if tasks.get(t) and set(tasks[t].tags) & set(config.regression_tags)
    )
    regressed = [
        t for t in tagged if t in before and mean(before[t]) >= 0.5 and not any(outcomes[t])
    ]
    if regressed:
        detail = (
            f"regression suite: {', '.join(regressed)} passed on the baseline and "
            "fail in every trial now"
        )
    else:
        detail = f"regression suite: none of the {len(tagged)} regression-tagged tasks regressed"
    failing = {t: ["passed on the baseline, fails every trial now"] for t in regressed}
    return RuleCheck(rule="regression suite", passed=not regressed, detail=detail), failing


def budget_rules(config: Gate, candidate: GradedEpisodes) -> tuple[BudgetFigures, list[RuleCheck]]:
    """The candidate's mean cost and 95th-percentile time against the budgets. A cost budget
    cannot pass while a model the candidate called has no price."""
    rows = list(candidate.rows.values())
    cost = mean(r.usage.cost_usd + r.user_usage.cost_usd for r in rows) if rows else 0.0
    unpriced = sorted({m for r in rows for m in [*r.usage.unpriced, *r.user_usage.unpriced]})
    durations = sorted(r.duration_s for r in rows)
    p95 = (
        quantiles(durations, n=20, method="inclusive")[-1]
        if len(durations) > 1
        else (durations[0] if durations else 0.0)
    )
    budgets, checks = config.budgets, []
    if budgets.cost_usd_per_episode is not None:
        limit = budgets.cost_usd_per_episode
        if unpriced:
            detail = (
                f"cost budget: cannot be checked: no price for {', '.join(unpriced)} (their "
                f"calls count as $0, so ${cost:.4f} per episode is a lower bound); add them to "
                "a --prices file"
            )
        else:
            verb = "is over" if cost > limit else "is within"
            detail = f"cost budget: ${cost:.4f} per episode {verb} the budget of ${limit:g}"
        passed = not unpriced and cost <= limit
        checks.append(RuleCheck(rule="cost budget", passed=passed, detail=detail))
    if budgets.latency_s_p95 is not None:
        over = p95 > budgets.latency_s_p95
        checks.append(
            RuleCheck(
                rule="latency budget",
                passed=not over,
                detail=f"latency budget: 95th-percentile episode time {p95:.1f}s "
                f"{'is over' if over else 'is within'} the budget of {budgets.latency_s_p95:g}s",
            )
        )
    figures = BudgetFigures(cost_usd_per_episode=cost, latency_s_p95=p95, unpriced_models=unpriced)
    return figures, checks

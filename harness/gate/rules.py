"""The gate's rules. Each returns its `RuleCheck` (passed, failed or undecided, with its
figures), so a report lists every rule, and a rule never passes on missing evidence: errors are
counted per run, too few tasks fail, an unpriced model fails a budget, and the statistical rules
read missing evidence both ways (`harness.gate.family`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from statistics import mean, quantiles
from typing import Literal

from harness.compare import ComparisonResult, GradedEpisodes
from harness.compare.money import against, as_written, usd, usd_against
from harness.gate.family import (
    REGRESSION,
    WORSE,
    Family,
    Member,
    Status,
    floors,
    status,
    tagged,
)
from harness.gate.figures import BudgetFigures, LevelFigures, RuleCheck, RunErrors
from harness.specs.gate import Gate
from harness.stats import run_rate
from harness.store import PlayedTask


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
        elif undecided and verdict.outcome == "pass":
            soft += 1
            first = undecided[0].error_side
            by_side[f"{first.value if first else 'unknown'} (soft check)"] += 1
    if side.ungraded:
        by_side["ungraded"] = len(side.ungraded)
    episodes = len(side.rows) + len(side.ungraded)
    missing = errors + len(side.ungraded)
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
    """A run may hold at most `max_error_rate` of episodes without a verdict. A pass whose soft
    check could not decide is a verdict (soft checks decide nothing): it is named, not counted,
    so a judge that cannot run never fails a gate its verdicts do not depend on."""
    missing = figures.errors + figures.ungraded
    sides = ", ".join(f"{side} {n}" for side, n in figures.by_side.items()) or "none"
    over = figures.rate > config.max_error_rate
    return RuleCheck(
        rule=f"errors ({figures.role})",
        passed=not over,
        detail=f"errors: {figures.role} run {figures.run_id}: {missing}/{figures.episodes} "
        f"episodes without a verdict ({figures.rate:.1%}; {figures.errors} error verdicts, "
        f"{figures.ungraded} ungraded; by side: {sides}) {'is over' if over else 'is within'} "
        f"the limit of {config.max_error_rate:.0%}"
        + (
            f"; {figures.soft_errors} passes with an undecided soft check (not counted)"
            if figures.soft_errors
            else ""
        ),
    )


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


def floor_figures(
    config: Gate, outcomes: dict[str, list[bool]], cases: Sequence[PlayedTask]
) -> dict[str, LevelFigures]:
    """Each floor's graded pass rate and interval (`run_rate`), by rule name."""
    figures = {}
    for rule, floor, ids in floors(config, cases):
        chosen = {t: trials for t, trials in outcomes.items() if t in ids and trials}
        if chosen:
            found = run_rate(chosen)
            figures[rule] = LevelFigures(
                rate=found.estimate,
                n=found.episodes,
                tasks=found.tasks,
                low=found.low,
                high=found.high,
                floor=floor,
            )
    return figures


def statistical_rules(
    config: Gate,
    favoured: Family,
    other: Family | None,
    graded_floors: dict[str, LevelFigures],
    cases: Sequence[PlayedTask],
    comparison: ComparisonResult | None,
    paired: bool,
) -> tuple[list[RuleCheck], dict[str, list[str]]]:
    """The rules the family decides, in order: floors, then with a baseline (`paired`) worse
    than the baseline (its line with the comparison's figures, when given) and the regression
    suite; and the regression-tagged tasks that fail the gate, with why."""
    checks = []
    for rule, floor, ids in floors(config, cases):
        if rule not in graded_floors:
            detail = (
                f"{rule}: no graded episode on its {len(ids)} tasks: its floor of "
                f"{floor:.0%} cannot be shown to hold"
            )
            checks.append(RuleCheck(rule=rule, passed=False, status="fail", detail=detail))
        else:
            checks.append(_rule(rule, favoured, other, config.alpha, _floor_line(rule)))
    failing: dict[str, list[str]] = {}
    if paired:
        checks.append(_rule(WORSE, favoured, other, config.alpha, _worse_line(comparison)))
        suite = _rule(REGRESSION, favoured, other, config.alpha, _regression_line(config, cases))
        checks.append(suite)
        for member in favoured.of(REGRESSION):
            if member.fails(config.alpha):
                failing[member.name] = [suite.detail]
    return checks, failing


Describe = Callable[[Status, list[Member], list[Member], str], str]


def _rule(
    rule: str, favoured: Family, other: Family | None, alpha: float, describe: Describe
) -> RuleCheck:
    """One statistical rule's check: its status from the family, and its line."""
    members = favoured.of(rule)
    decided, deciders, why = status(members, other.of(rule) if other else None, alpha)
    adjusted = min((m.adjusted for m in members), default=1.0)
    if decided == "fail":
        verdict = f"family-adjusted p = {deciders[0].adjusted:.4f} <= alpha {alpha:g}"
    elif why == "errors":
        verdict = (
            f"undecided: errors: it holds with the missing evidence counted for the candidate "
            f"(family-adjusted p = {adjusted:.4f}) and fails counted against it "
            f"(p = {deciders[0].adjusted:.4f})"
        )
    elif why == "evidence":
        unable = deciders[0]
        verdict = (
            f"undecided: {unable.hint}, family-adjusted {unable.best_adjusted:.4f} > alpha "
            f"{alpha:g}" + (f"; {unable.needs}" if unable.needs else "")
        )
    else:
        verdict = f"family-adjusted p = {adjusted:.4f} > alpha {alpha:g}"
    return RuleCheck(
        rule=rule,
        passed=decided == "pass",
        status=decided,
        detail=describe(decided, members, deciders, verdict),
        p_value=min((m.p_value for m in members), default=None),
        adjusted_p=adjusted if members else None,
    )


def _floor_line(rule: str) -> Describe:
    def line(decided: Status, members: list[Member], _: list[Member], verdict: str) -> str:
        said = {"fail": "is significantly below", "pass": "is not shown below"}.get(decided, "vs")
        figures = members[0].figures.replace("against", said) if members else ""
        return f"{rule}: {figures}; {verdict}"

    return line


def _worse_line(comparison: ComparisonResult | None) -> Describe:
    def line(decided: Status, members: list[Member], _: list[Member], verdict: str) -> str:
        head = "not worse than the baseline" if decided == "pass" else "worse than the baseline"
        test = members[0].figures if members else ""
        if comparison is None:
            return f"{head}: {test}; {verdict}"
        d = comparison.tasks
        return (
            f"{head}: pass rate {comparison.a.rate:.1%} -> {comparison.b.rate:.1%} "
            f"(task-clustered difference {d.difference:+.1%}, 95% CI {d.low:+.1%} to "
            f"{d.high:+.1%}); {test}; {verdict}"
        )

    return line


def _regression_line(config: Gate, cases: Sequence[PlayedTask]) -> Describe:
    count = len(tagged(config, cases))

    def line(decided: Status, members: list[Member], deciders: list[Member], verdict: str) -> str:
        if not members:
            return f"regression suite: none of the {count} regression-tagged tasks on both sides"
        declined = [m for m in members if m.suspect]
        shown = f": {', '.join(m.figures for m in declined)}" if declined else ""
        named = f" ({', '.join(m.name for m in deciders)})" if decided == "fail" else ""
        return (
            f"regression suite: {len(declined)} of {len(members)} regression-tagged tasks "
            f"declined{shown}; each task tested on its own; {verdict}{named}"
        )

    return line


def budget_rules(config: Gate, candidate: GradedEpisodes) -> tuple[BudgetFigures, list[RuleCheck]]:
    """The candidate's mean cost (agent, simulated user and judge calls) and 95th-percentile
    time against the budgets. A cost budget cannot pass while a model it called has no price."""
    rows = list(candidate.rows.values())
    spends = [r.spend for r in rows]
    cost = mean(s.cost_usd for s in spends) if rows else 0.0
    unpriced = sorted({m for s in spends for m in s.unpriced})
    durations = sorted(r.duration_s for r in rows)
    p95 = (
        quantiles(durations, n=20, method="inclusive")[-1]
        if len(durations) > 1
        else (durations[0] if durations else 0.0)
    )
    roles = {
        "agent": mean(r.usage.cost_usd for r in rows) if rows else 0.0,
        "user": mean(r.user_usage.cost_usd for r in rows) if rows else 0.0,
        "judge": mean(r.judge_usage.cost_usd for r in rows) if rows else 0.0,
    }
    budgets, checks = config.budgets, []
    if budgets.cost_usd_per_episode is not None:
        limit = budgets.cost_usd_per_episode
        by_role = ", ".join(f"{role} {usd(spent)}" for role, spent in roles.items())
        if unpriced:
            detail = (
                f"cost budget: cannot be checked: no price for {', '.join(unpriced)} (their "
                f"calls count as $0, so {usd(cost)} per episode ({by_role}) is a lower bound); "
                "add them to a --prices file"
            )
        else:
            verb = "is over" if cost > limit else "is within"
            detail = (
                f"cost budget: {usd_against(cost, limit)} per episode ({by_role}) {verb} the "
                f"budget of ${as_written(limit)}"
            )
        passed = not unpriced and cost <= limit
        checks.append(RuleCheck(rule="cost budget", passed=passed, detail=detail))
    if budgets.latency_s_p95 is not None:
        over = p95 > budgets.latency_s_p95
        checks.append(
            RuleCheck(
                rule="latency budget",
                passed=not over,
                detail=f"latency budget: 95th-percentile episode time "
                f"{against(p95, budgets.latency_s_p95, 1)}s "
                f"{'is over' if over else 'is within'} the budget of "
                f"{as_written(budgets.latency_s_p95)}s",
            )
        )
    figures = BudgetFigures(
        cost_usd_per_episode=cost,
        agent_cost_usd_per_episode=roles["agent"],
        user_cost_usd_per_episode=roles["user"],
        judge_cost_usd_per_episode=roles["judge"],
        latency_s_p95=p95,
        unpriced_models=unpriced,
    )
    return figures, checks

"""Variant B against variant A over the (task, trial) pairs both graded: the task as the unit of
every interval and test, the verdict that must hold with errors counted either way, pass^k,
breakdowns, spend and the tasks that flipped."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from statistics import mean

from harness import defaults
from harness.compare.episodes import GradedEpisodes, Key
from harness.compare.results import (
    ComparisonResult,
    ErrorBounds,
    PairedTest,
    PassHatK,
    PassRate,
    PassRates,
    RunPassRate,
    SideErrors,
    Spend,
    Spends,
    TaskDifference,
    Verdict,
)
from harness.stats import (
    at_most,
    clustered_difference,
    lattice_scale,
    mcnemar_exact,
    minimum_detectable_effect,
    run_rate,
    suite_pass_hat_k,
)
from harness.store import PlayedTask

PASS_HAT_KS = (1, 2, 4, 8)  # pass^k is shown at these k and at the number of trials


def paired_keys(a: GradedEpisodes, b: GradedEpisodes) -> tuple[list[Key], set[Key]]:
    """The (task, trial) pairs both sides graded without error, and those left out (both
    played them, at least one without evidence)."""
    shared = a.keys() & b.keys()
    errored = {k for k in shared if a.missing(k) or b.missing(k)}
    return sorted(shared - errored), errored


def pass_rate(outcomes: dict[str, list[bool]]) -> PassRate:
    """The pass rate of graded outcomes by task, with its interval clustered by task."""
    found = run_rate(outcomes)
    return PassRate(
        rate=found.estimate,
        passed=round(found.passed),
        n=found.episodes,
        tasks=found.tasks,
        low=found.low,
        high=found.high,
    )


def task_difference(
    a: dict[str, list[bool]], b: dict[str, list[bool]], alpha: float = 0.05
) -> TaskDifference:
    """B - A over the tasks both sides have, the task as the unit (`clustered_difference`)."""
    found = clustered_difference(a, b)
    scale = lattice_scale([*a.values(), *b.values()])
    return TaskDifference(
        tasks=found.tasks,
        difference=found.difference,
        se=found.se,
        low=found.low,
        high=found.high,
        interval=found.method,
        p_value=found.test.p_value,
        p_worse=found.test.p_less,
        p_better=found.test.p_greater,
        exact=found.test.exact,
        better_tasks=found.better,
        worse_tasks=found.worse,
        mde=minimum_detectable_effect(found.se, found.tasks, alpha, scale=scale),
    )


def verdict_of(difference: TaskDifference, alpha: float) -> Verdict:
    """better / worse when the two-sided task-level test rejects at alpha."""
    if not at_most(difference.p_value, alpha):
        return "no detectable difference"
    return "better" if difference.difference > 0 else "worse"


def side_errors(side: GradedEpisodes, shared: set[Key]) -> SideErrors:
    missing = sum(side.missing(key) for key in shared)
    return SideErrors(
        episodes=len(shared), missing=missing, rate=missing / len(shared) if shared else 0.0
    )


def decide(
    paired: TaskDifference,
    bounds: ErrorBounds | None,
    errors: tuple[SideErrors, SideErrors],
    alpha: float,
    max_error_rate: float,
) -> tuple[Verdict, str]:
    """The verdict over the pairs both graded, if it holds with every error counted either way
    and neither side is over the error ceiling; else 'undecided: errors' with the reason."""
    over = [
        f"{name} lacks evidence on {e.missing}/{e.episodes} episodes ({e.rate:.1%})"
        for name, e in zip("AB", errors, strict=True)
        if e.rate > max_error_rate
    ]
    if over:
        return "undecided: errors", (
            f"{'; '.join(over)}, over the error ceiling of {max_error_rate:.0%}"
        )
    verdict = verdict_of(paired, alpha)
    if bounds is None:
        return verdict, ""
    ends = {
        "A's errors as passes": verdict_of(bounds.a_favoured, alpha),
        "B's errors as passes": verdict_of(bounds.b_favoured, alpha),
    }
    if set(ends.values()) == {verdict}:
        return verdict, ""
    said = "; ".join(f"{v} with {name}" for name, v in ends.items())
    return "undecided: errors", f"{verdict} over the pairs both graded, but {said}"


def pass_hat_ks(a: dict[str, list[bool]], b: dict[str, list[bool]]) -> list[PassHatK]:
    """pass^k of both sides at k in 1, 2, 4, 8 and n, the trials every task has."""
    trials = min((len(v) for v in [*a.values(), *b.values()]), default=0)
    ks = sorted({k for k in PASS_HAT_KS if k <= trials} | ({trials} if trials else set()))
    return [PassHatK(k=k, a=suite_pass_hat_k(a, k), b=suite_pass_hat_k(b, k)) for k in ks]


def _run_rate(side: GradedEpisodes, outcomes: dict[str, list[bool]]) -> RunPassRate:
    return RunPassRate(run_id=side.run_id, variant=side.variant, **pass_rate(outcomes).model_dump())


def _spend(side: GradedEpisodes, keys: list[Key]) -> Spend:
    rows = [side.rows[k] for k in keys]
    return Spend(
        cost_usd=mean(r.spend.cost_usd for r in rows) if rows else 0.0,
        agent_cost_usd=mean(r.usage.cost_usd for r in rows) if rows else 0.0,
        user_cost_usd=mean(r.user_usage.cost_usd for r in rows) if rows else 0.0,
        judge_cost_usd=mean(r.judge_usage.cost_usd for r in rows) if rows else 0.0,
        latency_s=mean(r.duration_s for r in rows) if rows else 0.0,
        turns=mean(r.turns for r in rows) if rows else 0.0,
    )


def _breakdowns(
    a: GradedEpisodes, b: GradedEpisodes, keys: list[Key], cases: Sequence[PlayedTask]
) -> dict[str, dict[str, PassRates]]:
    """Both sides' pass rates per task level and per tag."""
    by_case = {case.task.id: case.task for case in cases}
    groups: dict[str, dict[str, list[Key]]] = {"level": defaultdict(list), "tag": defaultdict(list)}
    for key in keys:
        task = by_case.get(key[0])
        if task is not None:
            groups["level"][str(task.level)].append(key)
            for tag in task.tags:
                groups["tag"][tag].append(key)
    return {
        name: {
            label: PassRates(
                a=pass_rate(a.outcomes(members)),
                b=pass_rate(b.outcomes(members)),
                difference=task_difference(a.outcomes(members), b.outcomes(members)),
            )
            for label, members in sorted(group.items())
        }
        for name, group in groups.items()
    }


def error_bounds(
    a: GradedEpisodes, b: GradedEpisodes, shared: set[Key], alpha: float
) -> ErrorBounds:
    """B - A with the pairs' missing evidence counted in A's favour and in B's."""
    return ErrorBounds(
        a_favoured=task_difference(a.imputed(shared, True), b.imputed(shared, False), alpha),
        b_favoured=task_difference(a.imputed(shared, False), b.imputed(shared, True), alpha),
    )


def compare_episodes(
    a: GradedEpisodes,
    b: GradedEpisodes,
    cases: Sequence[PlayedTask],
    alpha: float = 0.05,
    max_error_rate: float = defaults.MAX_ERROR_RATE,
) -> ComparisonResult:
    """The comparison of two graded runs over the (task, trial) pairs both graded without
    error, the task as the unit. Pairs where either side lacks evidence are left out of the
    figures, and the verdict must also hold with them counted as passes and as fails for the
    side that erred (errors arise only where no hard check failed, so dropping them is biased)."""
    keys, errored = paired_keys(a, b)
    shared = set(keys) | errored
    errors = (side_errors(a, shared), side_errors(b, shared))
    a_out, b_out = a.outcomes(keys), b.outcomes(keys)
    pairs_a = [a.passed(k) for k in keys]
    pairs_b = [b.passed(k) for k in keys]
    test = mcnemar_exact(pairs_a, pairs_b)
    worse = mcnemar_exact(pairs_a, pairs_b, alternative="less")
    difference = task_difference(a_out, b_out, alpha)
    bounds = error_bounds(a, b, shared, alpha) if errored else None
    verdict, reason = decide(difference, bounds, errors, alpha, max_error_rate)
    flips_down, flips_up = [], []
    for task_id in sorted(a_out):
        rate_a, rate_b = mean(a_out[task_id]), mean(b_out[task_id])
        if rate_a >= 0.5 > rate_b:
            flips_down.append(task_id)
        elif rate_b >= 0.5 > rate_a:
            flips_up.append(task_id)
    spend_a, spend_b = _spend(a, keys), _spend(b, keys)
    return ComparisonResult(
        a=_run_rate(a, a_out),
        b=_run_rate(b, b_out),
        pairs=len(keys),
        excluded_errors=len(errored),
        tasks=difference,
        alpha=alpha,
        verdict=verdict,
        verdict_reason=reason,
        max_error_rate=max_error_rate,
        errors_a=errors[0],
        errors_b=errors[1],
        bounds=bounds,
        mcnemar=PairedTest(
            b_only=test.b_only, a_only=test.a_only, p_value=test.p_value, p_b_worse=worse.p_value
        ),
        pass_hat_k=pass_hat_ks(a_out, b_out),
        breakdowns=_breakdowns(a, b, keys, cases),
        deltas=Spend(
            cost_usd=spend_b.cost_usd - spend_a.cost_usd,
            agent_cost_usd=spend_b.agent_cost_usd - spend_a.agent_cost_usd,
            user_cost_usd=spend_b.user_cost_usd - spend_a.user_cost_usd,
            judge_cost_usd=spend_b.judge_cost_usd - spend_a.judge_cost_usd,
            latency_s=spend_b.latency_s - spend_a.latency_s,
            turns=spend_b.turns - spend_a.turns,
        ),
        spend=Spends(a=spend_a, b=spend_b),
        flipped_to_fail=flips_down,
        flipped_to_pass=flips_up,
    )

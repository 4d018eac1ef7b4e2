"""The gate's statistical rules as one family of tests sharing the configured alpha.

Every rule that can fail a candidate on noise is a test with a p-value: worse than the baseline
(a one-sided sign-flip test over tasks), each regression-tagged task (a one-sided Fisher exact
test of its trials on both sides), each level and tag floor (a one-sided test that the rate is
below the floor, with the interval `harness.stats.run_rate` prints). They are combined by the
discrete Bonferroni procedure (`harness.stats.adjusted_p_values`): a candidate identical to the
baseline fails any of them with probability at most alpha, and a test that cannot reach a
p-value takes no share of it (a task that passed, or failed, every trial on both sides).
Regression tasks are tested one by one: improvements on other tasks never raise a broken
task's p-value.

A rule whose figures point toward failing but that could not fail with this design, even on
its most extreme outcome (`family` says how that is judged per rule), is undecided, and says
what evidence would decide it: more trials (the gate plays them, `harness.gate.evidence`) or
more tasks. Undecided is never a pass.

Missing evidence (error verdicts, ungraded episodes, after the gate played again what could
matter) is read both ways: counted in the candidate's favour (its missing episodes as passes,
the baseline's as fails) and against it. A rule fails when it fails on the favourable reading,
passes when it passes on the unfavourable one, and is otherwise undecided (errors): a
regression cannot hide behind missing evidence. The error rules cap how far apart the two
readings can be.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from math import comb
from typing import Literal

from harness.compare import GradedEpisodes
from harness.specs.gate import Gate
from harness.stats import (
    NullLevels,
    Outcomes,
    adjusted_p_values,
    at_most,
    binomial_cdf,
    fisher_decline,
    lattice_scale,
    rate_below,
    run_rate,
    sign_flip_test,
    task_differences,
)
from harness.store import PlayedTask

WORSE = "worse than the baseline"
REGRESSION = "regression suite"
Status = Literal["pass", "fail", "undecided"]


@dataclass
class Member:
    """One test of the family: what it tests, its p-value and null distribution, and the
    smallest p-value any outcome could give with this design (tasks and trials)."""

    rule: str  # the gate rule it belongs to
    name: str  # what it tests: a task id, a level, the suite
    p_value: float
    null: NullLevels
    best: float  # its p-value on the most extreme outcome this design allows
    suspect: bool  # the observed figures point toward failing (a rate under its floor, ...)
    figures: str  # the observed figures, for the rule's line
    hint: str = ""  # why it cannot decide
    needs: str = ""  # the evidence that would let it decide, when that is more trials
    tasks: list[str] = field(default_factory=list)  # the tasks it names (a declined one)
    adjusted: float = 1.0  # its discrete-Bonferroni adjusted p-value (set by `family`)
    best_adjusted: float = 1.0  # `best` adjusted as if observed (set by `family`)

    def fails(self, alpha: float) -> bool:
        return at_most(self.adjusted, alpha)

    def can_decide(self, alpha: float) -> bool:
        """Whether its most extreme outcome could fail it (`best_adjusted`, set by `family`)."""
        return at_most(self.best_adjusted, alpha)


@dataclass
class Sides:
    """The outcomes one reading of the missing evidence gives: per task, the candidate's over
    all its episodes (floors) and both sides' over the episodes both played (comparisons)."""

    candidate: dict[str, list[bool]]
    paired: tuple[dict[str, list[bool]], dict[str, list[bool]]] | None = None  # baseline, cand


@dataclass
class Family:
    """The family's members, with their adjusted p-values, under one reading of the errors."""

    members: list[Member] = field(default_factory=list)

    def of(self, rule: str) -> list[Member]:
        return [m for m in self.members if m.rule == rule]


def readings(
    candidate: GradedEpisodes, baseline: GradedEpisodes | None
) -> tuple[Sides, Sides | None]:
    """The outcomes the statistical rules are tested on: with missing evidence counted in the
    candidate's favour (its missing episodes as passes, the baseline's as fails), and, when
    anything is missing, the other way round."""
    own = candidate.keys()
    shared = own & baseline.keys() if baseline is not None else set()

    def reading(candidate_errors_pass: bool) -> Sides:
        paired = None
        if baseline is not None:
            before = baseline.imputed(shared, not candidate_errors_pass)
            paired = (before, candidate.imputed(shared, candidate_errors_pass))
        return Sides(candidate.imputed(own, candidate_errors_pass), paired)

    missing = any(candidate.missing(k) for k in own) or (
        baseline is not None and any(baseline.missing(k) for k in shared)
    )
    return reading(True), reading(False) if missing else None


def floors(config: Gate, cases: Sequence[PlayedTask]) -> list[tuple[str, float, set[str]]]:
    """(rule name, floor, task ids) of every level and tag floor the suite has tasks for."""
    found = []
    for level, floor in sorted(config.level_floors.items()):
        ids = {c.task.id for c in cases if c.task.level == level}
        if ids:
            found.append((f"level {level}", floor, ids))
    for tag, floor in sorted(config.tag_floors.items()):
        ids = {c.task.id for c in cases if tag in c.task.tags}
        if ids:
            found.append((f"tag {tag}", floor, ids))
    return found


def family(config: Gate, sides: Sides, cases: Sequence[PlayedTask]) -> Family:
    """Every test of the gate on one reading of the outcomes, adjusted together.

    `best_adjusted` says whether a member could fail at all on this design. A regression
    task's is its complete break adjusted beside the family's other tests as they are: where
    that cannot fail, more trials can (the gate plays them), and until they are played the
    task is undecided. A floor's and the worse rule's is their most extreme outcome alone:
    only more tasks could help them, so they are undecided only when no outcome of their own
    could be significant, and otherwise decide with the power their tasks give."""
    members = [*_floor_members(config, sides.candidate, cases)]
    if sides.paired is not None:
        baseline, candidate = sides.paired
        members.append(_worse_member(baseline, candidate, config.alpha))
        members += _regression_members(config, baseline, candidate, cases)
    nulls = [(m.p_value, m.null) for m in members]
    for member, adjusted in zip(members, adjusted_p_values(nulls), strict=True):
        member.adjusted = adjusted
    for i, member in enumerate(members):
        rest = [m for j, m in enumerate(members) if j != i]
        if member.rule != REGRESSION:
            member.best_adjusted = member.best
            continue
        member.best_adjusted = min(1.0, member.best + sum(m.null.at(member.best) for m in rest))
        if not member.can_decide(config.alpha):
            needed = _trials_to_show(rest, config.alpha)
            member.needs = f"{needed} trials a side could show it (the gate plays them: max_trials)"
    return Family(members)


def _trials_to_show(rest: list[Member], alpha: float, limit: int = 100) -> int:
    """The fewest trials a side at which a complete break of one task (every trial passing,
    then failing every one) is significant beside the family's other tests as they are."""
    for trials in range(1, limit + 1):
        best = 1 / comb(2 * trials, trials)
        if at_most(best + sum(m.null.at(best) for m in rest), alpha):
            return trials
    return limit


def status(
    members: list[Member], other: list[Member] | None, alpha: float
) -> tuple[Status, list[Member], str]:
    """A rule's status from its members under the candidate-favoured reading, and under the
    other reading when errors make them differ: fail, undecided ('errors', or 'evidence' when
    no outcome could be significant) or pass; the members that decided it; and why."""
    failing = [m for m in members if m.fails(alpha)]
    if failing:
        return "fail", failing, ""
    if other is not None and (hidden := [m for m in other if m.fails(alpha)]):
        return "undecided", hidden, "errors"
    unable = [m for m in members if m.suspect and not m.can_decide(alpha)]
    return ("undecided", unable, "evidence") if unable else ("pass", [], "")


def _worse_member(baseline: Outcomes, candidate: Outcomes, alpha: float) -> Member:
    """One-sided sign-flip test over tasks that the candidate's task rates are lower. Its null
    given the margins: continuous from 2^-m, m the tasks whose pooled trials are not all alike
    (only those can differ)."""
    differences = task_differences(baseline, candidate)
    scale = lattice_scale([*baseline.values(), *candidate.values()])
    test = sign_flip_test(differences, scale)
    mixed = sum(len({*baseline[t], *candidate[t]}) > 1 for t in baseline)
    worse, better = int((differences < -1e-12).sum()), int((differences > 1e-12).sum())
    tasks = len(baseline)
    fewest = 1
    while not at_most(2.0**-fewest, alpha):
        fewest += 1
    return Member(
        rule=WORSE,
        name="the suite",
        p_value=test.p_less,
        null=NullLevels(continuous_from=2.0**-mixed),
        best=2.0**-tasks,
        suspect=worse > better,
        figures=f"{worse} of {tasks} tasks worse, {better} better; one-sided "
        f"{'exact ' if test.exact else ''}sign-flip p = {test.p_less:.4f}",
        hint=f"{tasks} tasks cannot go below p = {2.0**-tasks:.4f}; it needs at least {fewest} "
        "tasks",
    )


def _regression_members(
    config: Gate, baseline: Outcomes, candidate: Outcomes, cases: Sequence[PlayedTask]
) -> Iterator[Member]:
    """One test per regression-tagged task: the one-sided Fisher exact test of its trials on
    both sides (`fisher_decline`). Suspect when the task declined; its most extreme outcome is
    a complete break (the baseline passing every trial, the candidate none)."""
    for task in sorted(tagged(config, cases) & baseline.keys()):
        before, after = baseline[task], candidate[task]
        bp, bn, cp, cn = int(sum(before)), len(before), int(sum(after)), len(after)
        p_value, null = fisher_decline(bp, bn, cp, cn)
        best = 1 / comb(bn + cn, cn)
        yield Member(
            rule=REGRESSION,
            name=task,
            tasks=[task],
            p_value=p_value,
            null=null,
            best=best,
            suspect=cp * bn < bp * cn,
            figures=f"{task} {bp}/{bn} -> {cp}/{cn} (one-sided Fisher p = {p_value:.4f})",
            hint=f"{task} {bp}/{bn} -> {cp}/{cn}: {bn} trials a side cannot show a regression "
            f"(a task passing every trial, then failing every one, gives p = {best:.4f})",
        )


def _floor_members(
    config: Gate, outcomes: Outcomes, cases: Sequence[PlayedTask]
) -> Iterator[Member]:
    """Per level and tag floor, the one-sided test that the rate is below the floor."""
    for rule, floor, ids in floors(config, cases):
        chosen = {t: trials for t, trials in outcomes.items() if t in ids and trials}
        if not chosen:
            continue  # no graded episode: `statistical_rules` fails the floor on no evidence
        found, n = run_rate(chosen), len(chosen)
        p_value = rate_below(chosen, floor)
        binary = all(len(set(trials)) == 1 for trials in chosen.values())
        tail = [binomial_cdf(x, n, floor) for x in range(n + 1)]
        null = NullLevels(levels=tuple(tail)) if binary else NullLevels(continuous_from=tail[0])
        yield Member(
            rule=rule,
            name=rule,
            p_value=p_value,
            null=null,
            best=tail[0] if floor < 1 else 0.0,
            suspect=found.estimate < floor,
            figures=f"pass rate {found.estimate:.1%} (95% CI {found.low:.1%}-{found.high:.1%} "
            f"over {n} tasks) against the floor of {floor:.0%} (one-sided p = {p_value:.4f})",
            hint=f"{n} tasks all failing give p = {tail[0]:.4f}; a floor of {floor:.0%} needs "
            f"at least {_fewest_for_floor(floor, config.alpha)} tasks",
        )


def _fewest_for_floor(floor: float, alpha: float) -> int:
    """The fewest tasks whose all failing shows a rate below `floor` at alpha."""
    n = 1
    while floor < 1 and not at_most((1 - floor) ** n, alpha) and n < 10_000:
        n += 1
    return n


def tagged(config: Gate, cases: Iterable[PlayedTask]) -> set[str]:
    """The suite's regression-tagged tasks."""
    return {c.task.id for c in cases if set(c.task.tags) & set(config.regression_tags)}

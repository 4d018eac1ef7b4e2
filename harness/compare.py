"""Variant B against variant A on the same tasks, personas and seeds, without being fooled by
noise: the task is the unit of every interval and test (repeating trials adds no tasks), with
pass^k, breakdowns, deltas, and the tasks that flipped."""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import mean
from typing import Literal

from pydantic import BaseModel, Field

from harness import defaults
from harness.grading.relative import compare_pair
from harness.grading.result import Verdict as GradedVerdict
from harness.models import ChatModel
from harness.stats import (
    at_most,
    clustered_difference,
    lattice_scale,
    mcnemar_exact,
    minimum_detectable_effect,
    run_rate,
    suite_pass_hat_k,
)
from harness.store import EpisodeRow, PlayedTask, Store
from harness.store.tasks import full_task
from harness.transcript import EndReason, Side, Usage

Key = tuple[str, int]  # (task id, trial)
PASS_HAT_KS = (1, 2, 4, 8)  # pass^k is shown at these k and at the number of trials
# B's score in one judged pair: a tie counts half a win, so 0.5 means "no better" (chess scoring)
WIN_SCORES = {"b": 1.0, "tie": 0.5, "a": 0.0}
Verdict = Literal["better", "worse", "no detectable difference", "undecided: errors"]


@dataclass
class GradedEpisodes:
    """One stored run's graded episodes, keyed by (task, trial): what comparisons and the gate
    read, loaded once."""

    run_id: str
    variant: str
    rows: dict[Key, EpisodeRow] = field(default_factory=dict)
    ungraded: list[Key] = field(default_factory=list)  # stored episodes without a verdict

    @classmethod
    def load(cls, store: Store, run_id: str) -> GradedEpisodes:
        info = store.run(run_id)
        if info is None:
            raise LookupError(f"no run {run_id!r} in {store.path}")
        rows, ungraded = {}, []
        for row in store.episode_rows(run_id):
            if row.verdict is None:
                ungraded.append((row.task_id, row.trial))
            else:
                rows[(row.task_id, row.trial)] = row
        return cls(run_id, info.variant, rows, ungraded)

    @classmethod
    def from_outcomes(
        cls,
        run_id: str,
        variant: str,
        outcomes: Mapping[str, Sequence[bool | None] | Mapping[int, bool | None]],
    ) -> GradedEpisodes:
        """Graded episodes from outcomes per task, by trial (a list from trial 0, or a mapping
        of trial numbers; True pass, False fail, None an episode without evidence: an error
        verdict of the judge), without a store: for simulations of the decision rules and
        results gathered elsewhere. An agent's own crash is its failure (False), never missing
        evidence."""
        rows = {}
        for task, trials in outcomes.items():
            numbered = trials.items() if isinstance(trials, Mapping) else enumerate(trials)
            for trial, outcome in numbered:
                verdict = GradedVerdict(
                    task_id=task,
                    trial=trial,
                    outcome="error" if outcome is None else ("pass" if outcome else "fail"),
                    error_side=Side.JUDGE if outcome is None else None,
                )
                end = EndReason.ERROR if outcome is None else EndReason.USER_STOP
                rows[(task, trial)] = EpisodeRow(
                    task, trial, end, 1, Usage(), Usage(), 0.0, verdict
                )
        return cls(run_id, variant, rows)

    def filled(self, replays: Sequence[GradedEpisodes]) -> GradedEpisodes:
        """This run with more episodes of its variant (the gate's evidence runs, in the order
        they were played): each (task, trial) holds the first episode with evidence among this
        run's and the replays', so that an episode re-played after an error fills its slot,
        and trials the replays added join the run's."""
        merged = GradedEpisodes(self.run_id, self.variant, dict(self.rows), list(self.ungraded))
        for replay in replays:
            known = merged.keys()
            for key in sorted(replay.keys()):
                if key in known and not merged.missing(key):
                    continue  # the first evidence counts
                if key in replay.rows and (key not in known or not replay.missing(key)):
                    merged.rows[key] = replay.rows[key]
                    merged.ungraded = [k for k in merged.ungraded if k != key]
                elif key not in known:
                    merged.ungraded.append(key)
        return merged

    def trials(self) -> dict[str, list[int]]:
        """The trial numbers stored per task, graded or not."""
        by_task: dict[str, list[int]] = defaultdict(list)
        for task, trial in sorted(self.keys()):
            by_task[task].append(trial)
        return dict(by_task)

    def only_tasks(self, task_ids: set[str]) -> GradedEpisodes:
        """The same run restricted to some tasks (the tasks two suites share)."""
        rows = {key: row for key, row in self.rows.items() if key[0] in task_ids}
        ungraded = [key for key in self.ungraded if key[0] in task_ids]
        return GradedEpisodes(self.run_id, self.variant, rows, ungraded)

    def outcome(self, key: Key) -> str:
        verdict = self.rows[key].verdict
        assert verdict is not None  # only graded episodes are loaded
        return verdict.outcome

    def passed(self, key: Key) -> bool:
        return self.outcome(key) == "pass"

    def outcomes(self, keys: Iterable[Key]) -> dict[str, list[bool]]:
        """Pass/fail per task over the given (task, trial) keys."""
        by_task: dict[str, list[bool]] = defaultdict(list)
        for key in sorted(keys):
            by_task[key[0]].append(self.passed(key))
        return dict(by_task)

    def keys(self) -> set[Key]:
        """Every stored episode's (task, trial), graded or not."""
        return {*self.rows, *self.ungraded}

    def missing(self, key: Key) -> bool:
        """No evidence for this episode: an error verdict, or no verdict at all."""
        return key not in self.rows or self.outcome(key) == "error"

    def imputed(self, keys: Iterable[Key], errors_pass: bool) -> dict[str, list[bool]]:
        """Pass/fail per task over the keys, each episode without evidence counted as a pass
        (`errors_pass`) or as a fail: the two ends between which the hidden outcomes lie."""
        by_task: dict[str, list[bool]] = defaultdict(list)
        for key in sorted(keys):
            by_task[key[0]].append(errors_pass if self.missing(key) else self.passed(key))
        return dict(by_task)

    def graded_outcomes(self) -> dict[str, list[bool]]:
        """Pass/fail per task over every episode with evidence."""
        return self.outcomes(key for key in self.rows if self.outcome(key) != "error")


class PassRate(BaseModel):
    """A pass rate over graded episodes, with its interval counting tasks, not trials."""

    rate: float = Field(
        description="Mean of the per-task pass rates (the share of the episodes that passed "
        "when every task has the same number of trials)."
    )
    passed: int = Field(description="Episodes that passed.")
    n: int = Field(description="Episodes counted.")
    tasks: int = Field(default=0, description="Tasks counted: the unit of the interval.")
    low: float = Field(
        description="Lower end of the 95% interval of the rate, clustered by task "
        "(`harness.stats.run_rate`)."
    )
    high: float = Field(description="Upper end of the same interval.")


class RunPassRate(PassRate):
    """One compared run's pass rate over the pairs both runs graded."""

    run_id: str = Field(description="The run in the results store.")
    variant: str = Field(description="Agent variant name.")


class TaskDifference(BaseModel):
    """B's pass rate minus A's with the task as the unit: what every decision rests on."""

    tasks: int = Field(description="Tasks compared (each with its paired trials).")
    difference: float = Field(description="Mean over tasks of B's task rate minus A's.")
    se: float = Field(
        description="Cluster-robust standard error: sd of the task differences "
        "over the square root of the number of tasks."
    )
    low: float = Field(
        description="Lower end of the 95% interval of the population's mean difference, the "
        "task as the unit (`harness.stats.difference_interval`)."
    )
    high: float = Field(description="Upper end of the same interval.")
    interval: str = Field(
        default="",
        description="How the interval was made: the score interval at the task-clustered "
        "effective size, or widened to the share of tasks a sample of this size can miss.",
    )
    p_value: float = Field(description="Two-sided sign-flip permutation p-value over tasks.")
    p_worse: float = Field(description="One-sided sign-flip p-value that B is worse.")
    p_better: float = Field(description="One-sided sign-flip p-value that B is better.")
    exact: bool = Field(description="Every sign pattern counted (else 20,000 random ones).")
    better_tasks: int = Field(description="Tasks whose pass rate is higher in B.")
    worse_tasks: int = Field(description="Tasks whose pass rate is lower in B.")
    mde: float = Field(
        description="Minimum detectable effect at this size: the difference a two-sided test "
        "at alpha finds with 80% power (`harness.stats.minimum_detectable_effect`)."
    )


class PassRates(BaseModel):
    """Both variants' pass rates over one group of pairs (a level or a tag), and their
    task-clustered difference."""

    a: PassRate = Field(description="Variant A.")
    b: PassRate = Field(description="Variant B.")
    difference: TaskDifference | None = Field(
        default=None, description="B - A over the group's tasks."
    )


class PairedTest(BaseModel):
    """The exact McNemar test on the (task, trial) pairs where only one side passed. It assumes
    independent trials, which trials of one task are not: shown for reference, it decides
    nothing."""

    b_only: int = Field(description="Pairs only B passed.")
    a_only: int = Field(description="Pairs only A passed.")
    p_value: float = Field(description="Two-sided p-value, assuming independent trials.")
    p_b_worse: float = Field(description="One-sided p-value that B is worse, same assumption.")


class PassHatK(BaseModel):
    """pass^k of both variants at one k."""

    k: int = Field(description="Trials that must all pass.")
    a: float = Field(description="Variant A's pass^k.")
    b: float = Field(description="Variant B's pass^k.")


class Spend(BaseModel):
    """Mean cost, time and turns per episode."""

    cost_usd: float = Field(description="US dollars per episode.")
    latency_s: float = Field(description="Seconds per episode.")
    turns: float = Field(description="Turns per episode.")


class Spends(BaseModel):
    """Both variants' spend per episode."""

    a: Spend = Field(description="Variant A.")
    b: Spend = Field(description="Variant B.")


class RelativeJudgement(BaseModel):
    """The pairwise judge's verdicts over every (task, trial) both runs played."""

    b_wins: int = Field(description="Pairs the judge gave to B.")
    a_wins: int = Field(description="Pairs the judge gave to A.")
    ties: int = Field(description="Pairs judged even.")
    judge_errors: int = Field(description="Pairs the judge failed to decide.")
    win_rate: float = Field(
        description="B's win rate, a tie counting half: the mean of per-task win rates."
    )
    low: float = Field(
        description="Lower end of the 95% interval of the win rate, clustered by task."
    )
    high: float = Field(description="Upper end of the same interval.")
    tasks: int = Field(default=0, description="Tasks with at least one decided pair.")
    usage: Usage = Field(default_factory=Usage, description="The judge's calls, both orders.")


class SideErrors(BaseModel):
    """One side's episodes without evidence among the (task, trial) pairs both runs played."""

    episodes: int = Field(description="Pairs both runs played.")
    missing: int = Field(
        description="This side's episodes among them with an error verdict or none."
    )
    rate: float = Field(description="missing / episodes.")


class ErrorBounds(BaseModel):
    """The comparison redone with every episode without evidence counted as a pass and as a
    fail for the side that erred: the decision must hold at both ends."""

    a_favoured: TaskDifference = Field(
        description="B - A with A's errors counted as passes and B's as fails."
    )
    b_favoured: TaskDifference = Field(
        description="B - A with B's errors counted as passes and A's as fails."
    )


class ComparisonResult(BaseModel):
    """Variant B against variant A over the (task, trial) pairs both graded without error."""

    a: RunPassRate = Field(description="Variant A (the baseline side).")
    b: RunPassRate = Field(description="Variant B (the candidate side).")
    pairs: int = Field(description="Pairs compared.")
    excluded_errors: int = Field(description="Pairs left out because either side errored.")
    tasks: TaskDifference = Field(description="B - A with the task as the unit.")
    alpha: float = Field(default=0.05, description="Significance level of the verdict.")
    verdict: Verdict = Field(
        description="better or worse when the two-sided task-level test is at most alpha over "
        "the pairs both graded and also with every error counted either way; 'undecided: "
        "errors' when the errors could change it or either side is over the error ceiling."
    )
    verdict_reason: str = Field(default="", description="Why the verdict is undecided, if so.")
    max_error_rate: float = Field(
        default=defaults.MAX_ERROR_RATE,
        description="The error ceiling: a side with more missing evidence gets no verdict.",
    )
    errors_a: SideErrors | None = Field(default=None, description="A's missing evidence.")
    errors_b: SideErrors | None = Field(default=None, description="B's missing evidence.")
    bounds: ErrorBounds | None = Field(
        default=None, description="The difference with errors counted either way, if any."
    )
    mcnemar: PairedTest = Field(description="Exact McNemar test, assuming independent trials.")
    pass_hat_k: list[PassHatK] = Field(
        description="pass^k of both variants at k = 1, 2, 4, 8 and the number of trials."
    )
    breakdowns: dict[str, dict[str, PassRates]] = Field(
        description="Pass rates and their task-clustered difference by level and by tag: "
        "'level' or 'tag' -> group -> rates."
    )
    deltas: Spend = Field(description="B - A of the spend per episode.")
    spend: Spends = Field(description="Spend per episode of both variants.")
    flipped_to_fail: list[str] = Field(description="Tasks A mostly passed and B mostly fails.")
    flipped_to_pass: list[str] = Field(description="Tasks A mostly failed and B mostly passes.")
    relative: RelativeJudgement | None = Field(
        default=None, description="The relative judge's win rate, when it was asked."
    )

    def _repr_html_(self) -> str:
        """The comparison in a notebook: both rates, the paired difference, the verdict."""
        side = "{:.1%} [{:.1%}, {:.1%}]".format
        d = self.tasks
        rows = [
            f"A {side(self.a.rate, self.a.low, self.a.high)}, "
            f"B {side(self.b.rate, self.b.low, self.b.high)} ({self.pairs} pairs)",
            f"B - A {d.difference:+.1%} [{d.low:+.1%}, {d.high:+.1%}] over {d.tasks} tasks, "
            f"p = {d.p_value:.3g}",
            f"verdict: {self.verdict}"
            + (f" ({self.verdict_reason})" if self.verdict_reason else ""),
            "flipped to pass: " + (", ".join(self.flipped_to_pass) or "none"),
            "flipped to fail: " + (", ".join(self.flipped_to_fail) or "none"),
        ]
        return "<br>".join(html.escape(row) for row in rows)


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
        cost_usd=mean(r.usage.cost_usd for r in rows) if rows else 0.0,
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
            latency_s=spend_b.latency_s - spend_a.latency_s,
            turns=spend_b.turns - spend_a.turns,
        ),
        spend=Spends(a=spend_a, b=spend_b),
        flipped_to_fail=flips_down,
        flipped_to_pass=flips_up,
    )


async def judge_pairs(
    store: Store,
    a: GradedEpisodes,
    b: GradedEpisodes,
    cases: Sequence[PlayedTask],
    judge: ChatModel,
) -> RelativeJudgement:
    """The relative judge over every (task, trial) both sides played: win rate of B over A."""
    tasks = {case.task.id: full_task(case) for case in cases}
    a_transcripts = {(t.task_id, t.trial): t for t, _, _ in store.transcripts(a.run_id)}
    scores: dict[str, list[float]] = defaultdict(list)
    failures, usage = 0, Usage()
    for transcript, _, _ in store.transcripts(b.run_id):
        key = (transcript.task_id, transcript.trial)
        if key not in a_transcripts or transcript.task_id not in tasks:
            continue
        verdict = await compare_pair(
            tasks[transcript.task_id], a_transcripts[key], transcript, judge
        )
        usage.add(verdict.usage)
        if verdict.winner is None:
            failures += 1
        else:
            scores[transcript.task_id].append(WIN_SCORES[verdict.winner])
    flat = [s for trials in scores.values() for s in trials]
    rate = run_rate(scores)
    return RelativeJudgement(
        b_wins=flat.count(1.0),
        a_wins=flat.count(0.0),
        ties=flat.count(0.5),
        judge_errors=failures,
        win_rate=rate.estimate if flat else 0.5,
        low=rate.low,
        high=rate.high,
        tasks=rate.tasks,
        usage=usage,
    )


async def compare_runs(
    store: Store,
    run_a: str,
    run_b: str,
    cases: Sequence[PlayedTask],
    judge: ChatModel | None = None,
    max_error_rate: float = defaults.MAX_ERROR_RATE,
) -> ComparisonResult:
    """Compare two stored runs; with a judge, also ask it which transcript of each pair is
    better. The one comparison of stored runs, for the `compare` node and command alike."""
    a, b = GradedEpisodes.load(store, run_a), GradedEpisodes.load(store, run_b)
    result = compare_episodes(a, b, cases, max_error_rate=max_error_rate)
    if judge is not None:
        result.relative = await judge_pairs(store, a, b, cases, judge)
    return result

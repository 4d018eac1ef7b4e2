"""The gate's statistical rules as one family sharing alpha, and the evidence the gate plays
before it decides, on deterministic suites built with `GradedEpisodes.from_outcomes`: the
decision is `harness.gate.evaluate_gate` and the loop `harness.gate.evidence.gather`, the
functions `harness gate`, the `gate` node and `harness.gate(...)` decide with; the player here
draws each new episode from a rule per task instead of an agent."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from math import comb
from pathlib import Path

import pytest

from harness.compare import GradedEpisodes, compare_episodes
from harness.domains.support import SupportDesk
from harness.gate import GateResult, evaluate_gate
from harness.gate.evidence import Gathered, Plan, Round, gather, plan, record
from harness.sim.suite import TaskCase
from harness.specs.gate import Gate
from harness.specs.load import Loaded
from harness.specs.persona import Persona
from harness.specs.task import Task

T, F, E = True, False, None  # pass, fail, an episode without evidence (a judge's error)
Rule = Callable[[str, int], bool | None]  # (task, trial) -> outcome


def cases(tasks: int, regression: int = 5) -> list[TaskCase]:
    """Tasks t0..t{n-1} with levels 1, 2, 3 in turn, the first `regression` tagged."""
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
                "scenario": {"reason": "a test"},
                "checks": [{"kind": "no_error"}],
            }
        )
        persona = Persona.model_construct(name="user")
        found.append(TaskCase(Loaded(task, Path(f"t{i}.yaml")), persona, SupportDesk, {}))
    return found


def suite(trials: int, tasks: int = 20, flaky: tuple[int, ...] = ()) -> dict[str, list]:
    """Every task passes every trial, but for `flaky` ones that alternate."""
    return {
        f"t{i}": [bool(k % 2) if i in flaky else T for k in range(trials)] for i in range(tasks)
    }


def played(rules: dict[str, Rule], tasks: int, trials: int, side: str) -> GradedEpisodes:
    """A side's first trials, each task's outcome by its rule (else a pass)."""
    outcomes = {
        f"t{i}": {k: rules.get(f"t{i}", lambda _t, _k: T)(f"t{i}", k) for k in range(trials)}
        for i in range(tasks)
    }
    return GradedEpisodes.from_outcomes(side, side, outcomes)


def gated(
    baseline: dict[str, Rule],
    candidate: dict[str, Rule],
    trials: int,
    config: Gate | None = None,
    tasks: int = 20,
    regression: int = 5,
    play: bool = True,
) -> tuple[GateResult, Gathered, list[Plan]]:
    """The whole procedure: the first `trials` of both sides, the evidence loop with a player
    that asks the same rules for every new (task, trial), then the decision."""
    config = config or Gate(kind="gate")
    suite_cases = cases(tasks, regression)
    asked: list[Plan] = []

    async def player(wanted: Plan, round_: int) -> Round:
        asked.append(wanted)
        sides = []
        for name, rules, trials_ in (
            ("candidate", candidate, wanted.candidate),
            ("baseline", baseline, wanted.baseline),
        ):
            outcomes = {
                task: {k: rules.get(task, lambda _t, _k: T)(task, k) for k in numbers}
                for task, numbers in trials_.items()
            }
            sides.append(GradedEpisodes.from_outcomes(f"{name}{round_}", name, outcomes))
        return Round(record(wanted, round_, None, None), sides[0], sides[1])

    gathered = asyncio.run(
        gather(
            config,
            played(candidate, tasks, trials, "candidate"),
            played(baseline, tasks, trials, "baseline"),
            suite_cases,
            player if play else None,
        )
    )
    result = evaluate_gate(config, gathered.candidate, gathered.baseline, suite_cases)
    return result, gathered, asked


def always(outcome: bool) -> Rule:
    return lambda _task, _trial: outcome


def alternating(_task: str, trial: int) -> bool:
    return bool(trial % 2)


def rule(result: GateResult, name: str):
    [found] = [r for r in result.rules if r.rule == name]
    return found


def test_identical_flaky_variants_at_one_trial_play_the_declined_tasks_then_pass() -> None:
    """The null that is undecided at 1 trial: flaky regression tasks landing differently in
    each run. The gate plays the declined ones to `max_trials` on both sides, then decides."""
    first_passes: Rule = lambda _task, trial: bool((trial + 1) % 2)  # noqa: E731
    baseline = {f"t{i}": first_passes for i in range(5)}
    candidate = {"t0": alternating, "t1": alternating, **{f"t{i}": first_passes for i in (2, 3, 4)}}
    result, gathered, asked = gated(baseline, candidate, trials=1)
    assert result.status == "pass" and not result.blocks, result.undecided
    # t0 and t1 went 1/1 -> 0/1: played up to 8 trials a side, trial numbers 1..7
    assert asked[0].candidate == {"t0": list(range(1, 8)), "t1": list(range(1, 8))}
    assert asked[0].baseline == asked[0].candidate
    assert asked[0].why == {"t0": {"regression"}, "t1": {"regression"}}
    assert gathered.candidate.trials()["t0"] == list(range(8))
    assert "0 of 5 regression-tagged tasks declined" in rule(result, "regression suite").detail


def test_at_one_trial_without_play_a_declined_regression_task_is_undecided_never_a_pass() -> None:
    result, gathered, _ = gated({}, {"t0": always(F)}, trials=1, play=False)
    assert result.status == "undecided" and not result.passed and result.blocks
    assert gathered.unplayed is not None
    assert gathered.unplayed.candidate == {"t0": list(range(1, 8))}
    line = rule(result, "regression suite").detail
    assert "t0 1/1 -> 0/1 (one-sided Fisher p = 0.5000)" in line
    assert (
        "1 trials a side cannot show a regression (a task passing every trial, then failing "
        in line
    )
    assert result.undecided == [line]
    warned = evaluate_gate(
        Gate(kind="gate", on_undecided="warn"), gathered.candidate, gathered.baseline, cases(20)
    )
    assert warned.status == "undecided" and not warned.blocks


def test_a_broken_regression_task_at_three_trials_fails_the_gate_beside_a_floor() -> None:
    """The shipped case that could never fail: 3/3 -> 0/3 has p = 1/20, and a level floor's
    share of alpha lifts it over 0.05. Without play the rule says it cannot decide; with play
    the task's 8 trials a side show the break at p = 1/12870."""
    config = Gate(kind="gate", level_floors={1: 0.75})
    result, _, _ = gated({}, {"t2": always(F)}, trials=3, config=config, play=False)
    suite_rule = rule(result, "regression suite")
    assert suite_rule.status == "undecided" and result.blocks
    # level 1 holds 7 tasks: the floor test's largest attainable p-value <= 0.05
    floor_share = sum(comb(7, k) * 0.75**k * 0.25 ** (7 - k) for k in range(3))
    assert suite_rule.detail.endswith(
        f"family-adjusted {0.05 + floor_share:.4f} > alpha 0.05; 4 trials a side could show it "
        "(the gate plays them: max_trials)"
    )
    result, _, asked = gated({}, {"t2": always(F)}, trials=3, config=config)
    assert result.status == "fail"
    assert asked[0].candidate == {"t2": [3, 4, 5, 6, 7]}
    assert rule(result, "regression suite").p_value == pytest.approx(1 / comb(16, 8))
    assert list(result.failing_tasks) == ["t2"]
    assert result.reasons == [rule(result, "regression suite").detail]
    assert "t2 8/8 -> 0/8" in result.reasons[0] and result.reasons[0].endswith("(t2)")


def test_improvements_on_other_tasks_do_not_hide_a_broken_one() -> None:
    """The claims app: the bug breaks 2 regression tasks (3/3 -> 0/3) and 'fixes' 9 others
    (0/3 -> 3/3). Tested one by one, the fixed tasks' p-values are 1; at 3 trials each could
    still have broken by chance, so they share alpha and the broken ones are played to 8."""
    baseline = {f"t{i}": always(F) for i in range(2, 11)}
    candidate = {"t0": always(F), "t1": always(F), **{f"t{i}": always(T) for i in range(2, 11)}}
    result, _, asked = gated(baseline, candidate, trials=3, regression=11)
    assert result.status == "fail"
    assert set(asked[0].candidate) == {"t0", "t1"}  # only the declined tasks are played
    assert result.failing_tasks.keys() == {"t0", "t1"}
    members = rule(result, "regression suite")
    assert members.p_value == pytest.approx(1 / comb(16, 8))
    assert "2 of 11 regression-tagged tasks declined" in members.detail


def test_a_floor_fails_only_when_the_rate_is_shown_below_it() -> None:
    outcomes = suite(1, tasks=21)
    base = GradedEpisodes.from_outcomes("b", "b", outcomes)
    floor = Gate(kind="gate", level_floors={1: 0.75})

    def decided(candidate: dict) -> GateResult:
        cand = GradedEpisodes.from_outcomes("c", "c", candidate)
        return evaluate_gate(floor, cand, base, cases(21, regression=0))

    # level 1 (7 tasks): 5 pass, a rate of 71% under the 75% floor, but 7 tasks cannot show it
    dipped = decided(outcomes | {"t0": [F], "t3": [F]})
    assert rule(dipped, "level 1").status == "pass"
    assert "is not shown below the floor of 75%" in rule(dipped, "level 1").detail
    low = decided(outcomes | {f"t{i}": [F] for i in (0, 3, 6, 9, 12)})  # 2 of 7 pass
    assert rule(low, "level 1").status == "fail"
    assert rule(low, "level 1").detail.startswith(
        "level 1: pass rate 28.6% (95% CI 3.7%-71.0% over 7 tasks) is significantly below the "
        "floor of 75% (one-sided p = 0.0129)"
    )
    # a floor 2 tasks could never show broken: undecided when the rate dips under it
    two = {"t0": [F], "t1": [T], "t2": [T], "t3": [T], "t4": [T], "t5": [T]}
    base2 = GradedEpisodes.from_outcomes("b", "b", two)
    cand2 = GradedEpisodes.from_outcomes("c", "c", two | {"t3": [F]})
    unable = evaluate_gate(Gate(kind="gate", level_floors={1: 0.6}), cand2, base2, cases(6, 0))
    assert rule(unable, "level 1").status == "undecided" and unable.status == "undecided"
    assert "a floor of 60% needs at least 4 tasks" in rule(unable, "level 1").detail


def test_missing_evidence_is_replayed_in_its_slot_and_what_stays_missing_is_read_both_ways() -> (
    None
):
    """A judge that failed on six tasks' first trial: the gate plays those trials again (same
    trial numbers, same seeds) and decides on the replays. A judge that keeps failing leaves
    the slots missing: counted for the candidate nothing changed, against it the rule could
    fail, so it is undecided (a regression cannot hide behind errors), and the gate blocks."""
    lost: Rule = lambda _task, trial: None if trial == 0 else T  # noqa: E731
    candidate = {f"t{i}": lost for i in range(8, 14)}
    config = Gate(kind="gate", regression_tags=[])
    result, gathered, asked = gated({}, candidate, trials=4, tasks=40, config=config)
    assert asked[0].candidate == {f"t{i}": [0] for i in range(8, 14)}  # the same slots
    assert asked[0].why["t8"] == {"replay"} and len(asked) == 2  # replayed twice, in vain
    assert result.status == "undecided"
    worse = rule(result, "worse than the baseline")
    assert worse.status == "undecided"
    assert "undecided: errors" in worse.detail and "fails counted against it" in worse.detail
    assert rule(result, "errors (candidate)").passed  # 6 of 160 episodes: within 5%

    failed_once: set[tuple[str, int]] = set()

    def judge_recovers(task: str, trial: int) -> bool | None:
        if trial == 0 and (task, trial) not in failed_once:
            failed_once.add((task, trial))
            return None
        return T

    candidate = {f"t{i}": judge_recovers for i in range(8, 14)}
    result, gathered, asked = gated({}, candidate, trials=4, tasks=40, config=config)
    assert len(asked) == 1 and not gathered.candidate.missing(("t8", 0))  # the replay filled it
    assert result.status == "pass"


def test_missing_evidence_that_cannot_change_the_decision_is_not_played_again() -> None:
    """One task of 40 loses its one trial to a judge error: counted either way, no rule
    changes (one task cannot make the mean worse, it is not tagged), so the gate plays nothing:
    a replay is a fresh episode, and where errors fall on passes it would bias the side."""
    result, gathered, asked = gated({}, {"t8": lambda _task, _trial: None}, trials=1, tasks=40)
    assert asked == [] and gathered.candidate.missing(("t8", 0))
    assert result.status == "pass"
    assert "errors: candidate run candidate: 1/40 episodes without a verdict" in (
        rule(result, "errors (candidate)").detail
    )


def test_unequal_trials_are_topped_up_never_dropped() -> None:
    """1 candidate trial against 3 of the baseline: the gate plays the candidate's trials 1
    and 2 of every task; deciding on unequal trials is refused."""
    config = Gate(kind="gate")
    baseline = GradedEpisodes.from_outcomes("b", "b", suite(3, tasks=8))
    candidate = GradedEpisodes.from_outcomes("c", "c", suite(1, tasks=8))
    wanted = plan(config, candidate, baseline, cases(8, 0), 1)
    assert wanted.candidate == {f"t{i}": [1, 2] for i in range(8)} and not wanted.baseline
    assert wanted.why["t0"] == {"top-up"}
    with pytest.raises(ValueError, match=r"t0 \(candidate 1, baseline 3 trials\)"):
        evaluate_gate(config, candidate, baseline, cases(8, 0))


def test_compare_is_undecided_over_its_error_ceiling_and_when_errors_could_flip_it() -> None:
    base = GradedEpisodes.from_outcomes("a", "A", suite(2, tasks=10))
    lost = suite(2, tasks=10) | {f"t{i}": [E, E] for i in range(4)}
    result = compare_episodes(base, GradedEpisodes.from_outcomes("b", "B", lost), cases(10))
    assert result.verdict == "undecided: errors"
    assert result.verdict_reason == (
        "B lacks evidence on 8/20 episodes (40.0%), over the error ceiling of 5%"
    )
    assert result.errors_b is not None and result.errors_b.missing == 8
    assert result.bounds is not None
    assert result.bounds.a_favoured.difference == pytest.approx(-0.4)
    assert result.bounds.b_favoured.difference == 0.0
    # with a ceiling that allows it, the errors still decide nothing: B could be worse or equal
    allowed = compare_episodes(
        base, GradedEpisodes.from_outcomes("b", "B", lost), cases(10), max_error_rate=0.5
    )
    assert allowed.verdict == "no detectable difference"  # 4 tasks cannot reach p <= 0.05


def test_the_minimum_detectable_effect_follows_the_trial_lattice() -> None:
    base = GradedEpisodes.from_outcomes("a", "A", suite(4, tasks=30))
    result = compare_episodes(base, base, cases(30))
    assert result.tasks.mde == pytest.approx(6 / (4 * 30))  # 6 tasks moving by one trial of 4

"""The gate's statistical rules as one family sharing alpha, on deterministic suites built with
`GradedEpisodes.from_outcomes` and run through `harness.gate.evaluate_gate`, the function the
`gate` command and node decide with."""

from __future__ import annotations

from math import comb
from pathlib import Path

import pytest

from harness.compare import GradedEpisodes, compare_episodes
from harness.domains.support import SupportDesk
from harness.gate import GateResult, evaluate_gate
from harness.sim.suite import TaskCase
from harness.specs.gate import Gate
from harness.specs.load import Loaded
from harness.specs.persona import Persona
from harness.specs.task import Task

T, F, E = True, False, None  # pass, fail, an error of the agent side


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


def gate(
    baseline: dict, candidate: dict, config: Gate | None = None, regression: int = 5
) -> GateResult:
    return evaluate_gate(
        config or Gate(kind="gate"),
        GradedEpisodes.from_outcomes("cand", "candidate", candidate),
        GradedEpisodes.from_outcomes("base", "baseline", baseline),
        cases(len(baseline), regression),
    )


def rule(result: GateResult, name: str):
    [found] = [r for r in result.rules if r.rule == name]
    return found


def test_identical_variants_with_regression_tasks_pass() -> None:
    """The null the old rule failed half the time: 5 regression tasks, identical variants whose
    flaky tasks land differently in each run (1/1 -> 0/1 on two of them, 0/1 -> 1/1 on two):
    each of the 4 moved tasks declines by one trial with chance 1/2: P(2 or more) = 11/16."""
    base = suite(1, flaky=(0, 1, 2, 3, 4))
    base |= {"t0": [T], "t1": [T], "t2": [F], "t3": [T], "t4": [F]}
    cand = dict(base) | {"t0": [F], "t1": [F], "t2": [T], "t4": [T]}
    result = gate(base, cand)
    assert result.passed, result.reasons
    suite_rule = rule(result, "regression suite")
    assert suite_rule.status == "undecided"
    assert suite_rule.detail == (
        "regression suite: 2 of 5 regression-tagged tasks declined (t0 1/1 -> 0/1, t1 1/1 -> "
        "0/1); per-task Fisher tests combined, exact p = 0.6875; undecided: one task's trials (t0 "
        "1/1 -> "
        "0/1, t1 1/1 -> 0/1) cannot show its regression below p = 0.5000; use trials >= 3 on "
        "both sides"
    )


def test_a_real_regression_at_three_trials_fails_naming_the_task() -> None:
    base = suite(3)
    cand = dict(base) | {"t2": [F, F, F]}
    result = gate(base, cand)
    assert not result.passed
    assert result.reasons == [
        "regression suite: 1 of 5 regression-tagged tasks declined (t2 3/3 -> 0/3); per-task "
        "Fisher tests combined, exact p = 0.0500; family-adjusted p = 0.0500 <= alpha 0.05"
    ]
    assert list(result.failing_tasks) == ["t2"]
    worse = rule(result, "worse than the baseline")  # one task cannot make the mean worse
    assert worse.status == "pass" and worse.adjusted_p == 1.0


def test_two_regressions_are_stronger_evidence_than_one() -> None:
    base = suite(3)
    cand = dict(base) | {"t0": [F, F, F], "t1": [F, F, F]}
    result = gate(base, cand, Gate(kind="gate", level_floors={1: 0.75, 2: 0.75, 3: 0.75}))
    suite_rule = rule(result, "regression suite")
    assert suite_rule.status == "fail"
    assert suite_rule.p_value == pytest.approx(1 / 400)  # (1/20)^2: both moved together


def test_a_fixed_regression_task_does_not_hide_a_broken_one() -> None:
    """A sum of passes would read t0 fixed and t1 broken as no change; combined per-task tests
    count t1's complete break, and t0 only as a task that could have broken (1/70 each)."""
    base = suite(4) | {"t0": [F] * 4}
    cand = dict(base) | {"t0": [T] * 4, "t1": [F] * 4}
    result = gate(base, cand)
    assert rule(result, "regression suite").status == "fail"
    assert result.failing_tasks.keys() == {"t1"}
    assert rule(result, "regression suite").p_value == pytest.approx(1 - (69 / 70) ** 2)


def test_rules_share_alpha_so_one_borderline_regression_beside_a_floor_does_not_fail() -> None:
    """A floor that could fail on noise takes its share of alpha: 1/20 alone was enough, with
    a floor beside it the adjusted p-value is 1/20 + what the floor could reach."""
    base = suite(3)
    cand = dict(base) | {"t2": [F, F, F]}
    result = gate(base, cand, Gate(kind="gate", level_floors={1: 0.75}))
    assert result.passed
    suite_rule = rule(result, "regression suite")
    assert suite_rule.status == "pass"
    # level 1 holds 7 tasks: the floor test's largest attainable p-value <= 0.05 is
    # P(X <= 2) for X ~ Binomial(7, 0.75)
    floor_share = sum(comb(7, k) * 0.75**k * 0.25 ** (7 - k) for k in range(3))
    assert suite_rule.adjusted_p == pytest.approx(0.05 + floor_share)
    assert "family-adjusted p = 0.0629 > alpha 0.05" in suite_rule.detail


def test_a_floor_fails_only_when_the_rate_is_shown_below_it() -> None:
    outcomes = suite(1, tasks=21)
    # level 1 (7 tasks): 5 pass, a rate of 71% under the 75% floor, but 7 tasks cannot show it
    dipped = outcomes | {"t0": [F], "t3": [F]}
    passed = gate(outcomes, dipped, Gate(kind="gate", level_floors={1: 0.75}), regression=0)
    assert rule(passed, "level 1").status == "pass"
    assert "is not shown below the floor of 75%" in rule(passed, "level 1").detail
    # 2 of 7 pass: significantly below
    low = outcomes | {f"t{i}": [F] for i in (0, 3, 6, 9, 12)}
    failed = gate(outcomes, low, Gate(kind="gate", level_floors={1: 0.75}), regression=0)
    assert rule(failed, "level 1").status == "fail"
    assert rule(failed, "level 1").detail.startswith(
        "level 1: pass rate 28.6% (95% CI 8.2%-64.1% over 7 tasks) is significantly below the "
        "floor of 75% (one-sided p = 0.0129)"
    )
    # a floor 2 tasks could never show broken: undecided when the rate dips under it
    two = {"t0": [F], "t1": [T], "t2": [T], "t3": [T], "t4": [T], "t5": [T]}
    unable = gate(two, two | {"t3": [F]}, Gate(kind="gate", level_floors={1: 0.6}), regression=0)
    assert rule(unable, "level 1").status == "undecided"
    assert "use at least 4 tasks" in rule(unable, "level 1").detail


def test_errors_count_for_the_candidate_and_undecided_when_they_could_fail_it() -> None:
    """Errors arise only where no hard check failed: dropping them biases the candidate down.
    A rule fails only with the candidate's errors counted as passes; if counting them as
    fails would fail it, the rule says so and stays undecided."""
    base = suite(4, tasks=40)
    cand = {task: list(trials) for task, trials in base.items()}
    for i in range(8, 14):  # six tasks lose a trial to errors: as passes, nothing changed
        cand[f"t{i}"][0] = E
    config = Gate(kind="gate", max_error_rate=0.05, regression_tags=[])
    result = gate(base, cand, config, regression=0)
    assert result.passed
    worse = rule(result, "worse than the baseline")
    assert worse.status == "undecided"
    assert "undecided: errors" in worse.detail and "fails counted against it" in worse.detail
    assert rule(result, "errors (candidate)").passed  # 6 of 160 episodes: within 5%


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

"""The CI regression gate and A/B comparison, through the command line (in this process; the
example CI workflow's commands in a subprocess, as CI runs them)."""

from __future__ import annotations

import os
import shlex
import sqlite3
from pathlib import Path

import pytest
import yaml
from junitparser import Error, Failure, JUnitXml

from tests.conftest import JUDGE, ROOT, SCRIPTED, newest_run, run_cli, run_harness, scripted_eval


def eval_run(store: Path, agent: str, *extra: str) -> str:
    scripted_eval(store, agent, "--trials", "3", *extra)  # the fewest that can show a regression
    return newest_run(store)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    store = tmp_path_factory.mktemp("gate") / "results.db"
    baseline = eval_run(store, "agents/support-baseline.yaml")
    same = eval_run(store, "agents/support-baseline.yaml", "--fresh")
    broken = eval_run(store, "agents/support-no-refunds.yaml")
    assert run_cli("baseline", "set", baseline, "--store", store).returncode == 0
    return {"store": store, "baseline": baseline, "same": same, "broken": broken}


def gate(runs: dict, candidate: str, folder: Path, *extra: str):
    return run_cli(
        "gate",
        "--config",
        "ci/gate.yaml",
        "--candidate",
        runs[candidate],
        "--store",
        runs["store"],
        "--junit",
        folder / "junit.xml",
        "--markdown",
        folder / "summary.md",
        *extra,
        COLUMNS="300",
    )


def test_an_identical_variant_passes(runs: dict, tmp_path: Path) -> None:
    done = gate(runs, "same", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "gate: PASS" in done.stdout
    assert (tmp_path / "summary.md").read_text().startswith("## Gate: ✅ **PASS**")


def test_a_variant_that_forbids_refunds_fails_naming_the_tasks(runs: dict, tmp_path: Path) -> None:
    done = gate(runs, "broken", tmp_path)
    assert done.returncode == 1
    assert "gate: FAIL" in done.stdout
    # 3/3 -> 0/3 alone is p = 1/20: the gate played both tasks to 8 trials a side first
    failed = (
        "regression suite: 2 of 8 regression-tagged tasks declined: refund-by-email 8/8 -> 0/8 "
        "(one-sided Fisher p = 0.0001), refund-delivered 8/8 -> 0/8 (one-sided Fisher p = "
        "0.0001); each task tested on its own; family-adjusted p = 0.0002 <= alpha 0.05 "
        "(refund-by-email, refund-delivered)"
    )
    assert failed in done.stdout
    assert (
        "evidence: round 1: played 10 candidate and 10 baseline episodes (regression: "
        "refund-by-email, refund-delivered) into "
    ) in done.stdout
    # 5 of 22 tasks worse and 1 better: with the task as the unit (the scripted agent repeats
    # every trial) that is not significant, whatever McNemar over (task, trial) pairs says.
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("## Gate: ❌ **FAIL**")
    assert f"- {failed}" in summary
    assert (
        "- ✅ not worse than the baseline: pass rate 77.3% -> 59.1% (task-clustered difference "
        "-18.2%, 95% CI -39.0% to +4.4%); 5 of 22 tasks worse, 1 better; one-sided exact "
        "sign-flip p = 0.1094; family-adjusted p = 0.5153 > alpha 0.05"
    ) in summary
    assert "- ✅ errors: candidate run " in summary  # every rule that holds is listed too

    report = JUnitXml.fromfile(str(tmp_path / "junit.xml"))
    suites = {suite.name: suite for suite in report}
    [tasks] = [s for name, s in suites.items() if name.startswith("support-no-refunds")]
    cases = {case.name: case for case in tasks}
    assert len(cases) == 22 and tasks.tests == 22
    failed = {
        name for name, case in cases.items() if any(isinstance(r, Failure) for r in case.result)
    }
    assert {"refund-by-email", "refund-delivered", "snapshot-refund"} <= failed
    refund = next(r for r in cases["refund-delivered"].result if isinstance(r, Failure))
    assert "order refunded" in refund.message and refund.message.startswith("3/3 trials failed")
    assert not any(isinstance(r, Error) for case in cases.values() for r in case.result)
    [gate_case] = list(suites["gate"])
    assert "regression suite" in gate_case.result[0].message


def test_exit_code_two_for_a_bad_config_or_unknown_runs(runs: dict, tmp_path: Path) -> None:
    bad = tmp_path / "gate.yaml"
    bad.write_text("kind: gate\nalpha: 2\n")
    done = run_cli("gate", "--config", bad, "--store", runs["store"])
    assert done.returncode == 2
    assert done.stderr.strip() == f"{bad}:2:1: alpha: Input should be less than 1, found 2"
    unknown = run_cli("gate", "--candidate", "nope", "--store", runs["store"])
    assert unknown.returncode == 2 and "no run 'nope' in the store" in unknown.stderr
    empty = run_cli("gate", "--store", tmp_path / "none.db")
    assert empty.returncode == 2 and "no results store" in empty.stderr


def test_baseline_show_and_history(runs: dict) -> None:
    shown = run_cli("baseline", "show", "--store", runs["store"])
    assert shown.returncode == 0
    assert shown.stdout.startswith(f"baseline: {runs['baseline']} (support-baseline ")
    assert "pass rate 77.3% (51/66 episodes, 95% CI 54.6%-92.2%, clustered by 22 tasks)" in (
        shown.stdout
    )
    listed = run_cli("history", "--store", runs["store"], COLUMNS="200")
    assert listed.returncode == 0
    rows = [line for line in listed.stdout.splitlines() if line.startswith("│ support")]
    assert rows, listed.stdout
    assert any("support-no-refunds" in r and " 59.1% " in r for r in rows)


def test_compare_two_stored_runs(runs: dict, tmp_path: Path) -> None:
    done = run_cli(
        "compare",
        runs["baseline"],
        runs["broken"],
        "--store",
        runs["store"],
        "--judge-model",
        JUDGE,
        "--markdown",
        tmp_path / "ab.md",
        COLUMNS="300",
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "A support-baseline" in out and "B support-no-refunds" in out
    assert "exact McNemar p = 0.0075 (3 pairs only B passed, 15 only A) over 66 pairs" in out
    assert "pass^2: A 77.3%, B 59.1%" in out
    assert "relative judge: B wins" in out
    assert (
        "flipped to fail: refund-already-refunded, refund-by-email, refund-delivered, "
        "snapshot-refund"
    ) in out
    assert "| pass rate | 77.3% (51/66, 95% CI 54.6%-92.2% clustered by 22 tasks)" in (
        (tmp_path / "ab.md").read_text()
    )


def test_compare_two_variants_on_the_same_seeds(tmp_path: Path) -> None:
    done = run_cli(
        "compare",
        "--a",
        "agents/support-baseline.yaml",
        "--b",
        "agents/support-careful.yaml",
        "--tasks",
        "tasks/support",
        "--trials",
        "2",
        "--set",
        SCRIPTED,
        "--judge-model",
        JUDGE,
        "--store",
        tmp_path / "r.db",
        "--no-traces",
        COLUMNS="300",
    )
    assert done.returncode == 0, done.stderr
    assert "flipped to pass: prompt-injection-refund, refund-outside-window" in done.stdout
    assert "relative judge: B wins 54.5%" in done.stdout
    with sqlite3.connect(tmp_path / "r.db") as db:
        seeds = db.execute(
            "SELECT run_id, json_extract(transcript, '$.seed') FROM episodes"
            " WHERE task_id = 'order-status' AND trial = 1"
        ).fetchall()
    assert len(seeds) == 2 and seeds[0][1] == seeds[1][1], "both variants met the same seed"


def test_the_example_workflow_is_valid_and_its_commands_run(workspace: Path) -> None:
    workflow = yaml.safe_load((ROOT / "ci/github-actions.yml").read_text())
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as true
    assert "pull_request" in triggers
    steps = workflow["jobs"]["eval"]["steps"]
    assert steps[0]["uses"].startswith("actions/checkout@")
    uploads = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert uploads[0]["with"]["path"].split() == [
        ".harness/gate-junit.xml",
        ".harness/gate-summary.md",
    ]
    env = {**workflow["env"], "WANDB_MODE": "disabled"}
    commands = [s["run"] for s in steps if s.get("run", "").startswith("harness ")]
    assert len(commands) == 2
    for command in commands:
        args = shlex.split(os.path.expandvars(command.replace("$CANDIDATE", env["CANDIDATE"])))
        done = run_harness(*args[1:], cwd=workspace, **env)
        assert done.returncode == 0, done.stdout + done.stderr
    for path in uploads[0]["with"]["path"].split():
        assert (workspace / path).is_file()
    assert "gate: PASS" in done.stdout


def latest_run(store: Path, variant: str) -> str:
    with sqlite3.connect(store) as db:
        return db.execute(
            "SELECT id FROM runs WHERE variant = ? AND json_extract(config, '$.evidence_for')"
            " IS NULL ORDER BY rowid DESC",
            (variant,),
        ).fetchone()[0]


def test_the_same_two_flipped_tasks_give_the_same_decision_at_1_3_and_6_trials(
    tmp_path: Path,
) -> None:
    """The scripted agent flips the same 2 of 22 tasks at every trial count: McNemar over
    (task, trial) pairs grows "significant" with repeats, the task-level decision does not."""
    config = tmp_path / "gate.yaml"
    config.write_text("kind: gate\nalpha: 0.05\nregression_tags: []\n")
    verdicts, decisions, mcnemar, mdes = set(), set(), [], []
    for trials in ("1", "3", "6"):
        store = tmp_path / f"r{trials}.db"
        done = run_cli(
            "compare",
            "--a",
            "agents/support-careful.yaml",
            "--b",
            "agents/support-baseline.yaml",
            "--tasks",
            "tasks/support",
            "--trials",
            trials,
            "--set",
            SCRIPTED,
            "--judge-model",
            JUDGE,
            "--no-relative",
            "--store",
            store,
            "--no-traces",
            COLUMNS="300",
        )
        assert done.returncode == 0, done.stderr
        [verdict] = [line for line in done.stdout.splitlines() if line.startswith("verdict:")]
        verdicts.add(verdict.split(";")[0])
        mdes.append(verdict.split("at this size: ")[1])
        [line] = [line for line in done.stdout.splitlines() if "exact McNemar p" in line]
        mcnemar.append(line.split("p = ")[1].split()[0])
        gated = run_cli(
            "gate",
            "--config",
            config,
            "--candidate",
            latest_run(store, "support-baseline"),
            "--baseline",
            latest_run(store, "support-careful"),
            "--store",
            store,
            "--markdown",
            tmp_path / f"gate{trials}.md",
            "--junit",
            tmp_path / f"gate{trials}.xml",
            COLUMNS="300",
        )
        assert gated.returncode == 0, gated.stdout + gated.stderr
        decisions.add(
            next(
                line for line in gated.stdout.splitlines() if "not worse than the baseline" in line
            ).split("(task-clustered")[1]
        )
    assert verdicts == {
        "verdict: no detectable difference (two-sided p = 0.5000 over 22 tasks, alpha 0.05)"
    }
    # at 1 trial the floor is 6 whole tasks of 22; with more trials the lattice is finer and
    # the clustered standard error (2 of 22 tasks moved) sets it
    assert mdes == ["27.3 points", "17.6 points", "17.6 points"]
    assert len(decisions) == 1 and "one-sided exact sign-flip p = 0.2500" in decisions.pop()
    assert mcnemar == ["0.5000", "0.0312", "0.0005"]  # what the old rule decided on


def test_a_misconfigured_judge_fails_the_gate_naming_the_error_rule(tmp_path: Path) -> None:
    """A judge whose replies cannot be read makes every llm_judge check an error: the run's pass
    rate over its graded episodes looks perfect (the run says it is no result), and the gate fails on the missing evidence and says so. (A typo in the
    judge's script path is refused before the run: tests/specs/test_first_hour_validation.py.)"""
    store = tmp_path / "results.db"
    confused = tmp_path / "judge-confused.yaml"
    confused.write_text("kind: script\nrules:\n  - reply: I am not sure what to say.\n")

    def play(agent: str, judge: str, code: int = 0) -> str:
        done = run_cli(
            "run-eval",
            "--tasks",
            "tasks/support",
            "--tags",
            "policy,billing",
            "--agent",
            agent,
            "--set",
            SCRIPTED,
            "--judge-model",
            judge,
            "--store",
            store,
            "--no-traces",
            COLUMNS="200",
        )
        assert done.returncode == code, done.stderr
        return done.stdout

    play("agents/support-baseline.yaml", JUDGE)
    baseline = latest_run(store, "support-baseline")
    # a third of the episodes without evidence: said before the rate, and the run exits 3
    out = play("agents/support-careful.yaml", f"{{id: scripted, script: {confused}}}", code=3)
    assert "2 of 6 episodes errored (judge 2): more than the 5% a gate accepts" in out
    assert "pass rate 100.0% (4/4 graded of 6 episodes" in out and "errors 2 (judge 2)" in out
    assert "soft checks that could not decide: 1 episodes (judge 1)" in out
    assert run_cli("baseline", "set", baseline, "--store", store).returncode == 0
    done = run_cli(
        "gate",
        "--config",
        "ci/gate.yaml",
        "--store",
        store,
        "--markdown",
        tmp_path / "summary.md",
        "--junit",
        tmp_path / "junit.xml",
        COLUMNS="400",
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "gate: FAIL" in done.stdout
    # at 1 trial the gate plays the two regression tasks the candidate passed no trial of to 8
    # trials a side, and the episodes without evidence again, twice: in vain, the judge fails on
    # every one
    assert (
        "evidence: round 1: played 16 candidate and 14 baseline episodes (regression: "
        "prompt-injection-refund, refund-outside-window; replay: prompt-injection-refund, "
        "refund-outside-window)"
    ) in done.stdout
    assert "evidence: round 2: played 16 candidate and 0 baseline episodes (replay: " in done.stdout
    assert (
        "errors: candidate run {run}: 16/20 episodes without a verdict (80.0%; 16 error verdicts, "
        "0 ungraded; by side: judge 16, judge (soft check) 1) is over the limit of 5%; 1 passes "
        "with an undecided soft check (not counted)"
    ).format(run=latest_run(store, "support-careful")) in done.stdout
    chosen = "the newest run of the baseline's suite and lineage by a variant other than the"
    assert f"{chosen} baseline's" in " ".join(done.stdout.split())
    # compare applies the gate's error ceiling: no verdict on a run a third of which errored
    candidate = latest_run(store, "support-careful")
    compared = run_cli(
        "compare", baseline, candidate, "--store", store, "--no-relative", COLUMNS="400"
    )
    assert compared.returncode == 0, compared.stderr
    assert (
        "verdict: undecided: errors: B lacks evidence on 2/6 episodes (33.3%), over the error "
        "ceiling of 5%"
    ) in compared.stdout
    assert "errors: A 0/6 (0.0%), B 2/6 (33.3%) of the pairs both played" in compared.stdout
    loose = run_cli(
        "compare",
        baseline,
        candidate,
        "--store",
        store,
        "--no-relative",
        "--max-error-rate",
        "0.5",
        COLUMNS="400",
    )
    assert "verdict: no detectable difference" in loose.stdout


def test_unpriced_models_block_a_cost_budget() -> None:
    from harness.compare import GradedEpisodes
    from harness.gate import evaluate_gate
    from harness.grading.result import Verdict
    from harness.specs.gate import Gate
    from harness.store import EpisodeRow
    from harness.transcript import Usage

    def episodes(unpriced: list[str]) -> GradedEpisodes:
        rows = {
            (f"t{i}", 0): EpisodeRow(
                task_id=f"t{i}",
                trial=0,
                end_reason="user_stop",
                turns=2,
                usage=Usage(calls=2, cost_usd=0.001, unpriced=unpriced),
                user_usage=Usage(),
                duration_s=1.0,
                verdict=Verdict(task_id=f"t{i}", outcome="pass"),
            )
            for i in range(6)
        }
        return GradedEpisodes("run", "variant", rows)

    config = Gate.model_validate({"kind": "gate", "budgets": {"cost_usd_per_episode": 0.05}})
    blocked = evaluate_gate(config, episodes(["openai/new-model"]), None, [])
    assert not blocked.passed
    assert blocked.reasons == [
        "cost budget: cannot be checked: no price for openai/new-model (their calls count as $0, "
        "so $0.0010 per episode (agent $0.0010, user $0.0000, judge $0.0000) is a lower bound); "
        "add them to a --prices file"
    ]
    assert blocked.budgets.unpriced_models == ["openai/new-model"]
    priced = evaluate_gate(config, episodes([]), None, [])
    assert priced.passed
    assert [rule.rule for rule in priced.rules] == [
        "errors (candidate)",
        "tasks",
        "cost budget",
    ]


@pytest.fixture(scope="module")
def suites(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Runs of two suites and two lineages: the full support suite by production and by a
    candidate extending it, the refund tasks only, and the Python bot (its own lineage)."""
    store = tmp_path_factory.mktemp("suites") / "results.db"

    def play(agent: str, *extra: str) -> str:
        scripted_eval(store, agent, *extra)
        return newest_run(store)

    runs = {
        "store": store,
        "production": play("agents/support-baseline.yaml"),
        "candidate": play("agents/support-careful.yaml"),
        "refunds": play("agents/support-careful.yaml", "--tags", "refunds"),
        "python": play("agents/support-python.yaml"),
    }
    done = run_cli("baseline", "set", runs["production"], "--store", store)
    assert done.returncode == 0 and "for suite " in done.stdout and "of 22 tasks" in done.stdout
    return runs


def test_gate_without_a_candidate_takes_the_newest_run_of_the_suite_and_lineage(
    suites: dict, tmp_path: Path
) -> None:
    done = run_cli(
        "gate",
        "--store",
        suites["store"],
        "--markdown",
        tmp_path / "s.md",
        "--junit",
        tmp_path / "j.xml",
        COLUMNS="300",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert f"candidate {suites['candidate']} (support-careful, suite " in said
    assert (
        "the newest run of the baseline's suite and lineage by a variant other than the "
        "baseline's" in said
    )
    assert f"baseline {suites['production']} (support-baseline, suite " in done.stdout
    summary = (tmp_path / "s.md").read_text()
    assert "Runs compared:" in summary and suites["candidate"] in summary


def test_runs_of_different_suites_are_refused_unless_allowed(suites: dict, tmp_path: Path) -> None:
    store = suites["store"]
    files = ("--markdown", tmp_path / "s.md", "--junit", tmp_path / "j.xml")
    # no baseline of the refund suite: refused, naming the suites that have one
    alone = run_cli("gate", "--candidate", suites["refunds"], "--store", store, *files)
    assert alone.returncode == 2
    assert "no baseline for the candidate's suite" in alone.stderr
    assert "--allow-suite-change" in alone.stderr
    explicit = run_cli(
        "gate",
        "--candidate",
        suites["refunds"],
        "--baseline",
        suites["production"],
        "--store",
        store,
        *files,
    )
    assert explicit.returncode == 2
    assert "ran different suites (only in the baseline: address-change" in explicit.stderr
    allowed = run_cli(
        "gate",
        "--candidate",
        suites["refunds"],
        "--store",
        store,
        "--allow-suite-change",
        *files,
        COLUMNS="400",
    )
    assert allowed.returncode in (0, 1), allowed.stdout + allowed.stderr
    assert "only the 8 common tasks count: prompt-injection-refund, refund-already-refunded" in (
        allowed.stdout
    )
    result = (tmp_path / "s.md").read_text()
    assert "only the 8 common tasks count" in result


def test_suites_compare_by_task_id_and_content() -> None:
    from harness.gate.suites import compare_suites, describe_change

    same = compare_suites({"a": "1", "b": "2"}, {"b": "2", "a": "1"})
    assert same.same and same.common == ["a", "b"]
    changed = compare_suites({"a": "1", "b": "2", "c": "3"}, {"a": "1", "b": "9", "d": "4"})
    assert not changed.same and changed.common == ["a"]
    assert describe_change(changed) == (
        "only in the baseline: c; only in the candidate: d; changed content: b"
    )
    legacy = compare_suites({"a": "", "b": ""}, {"a": "1", "b": "2"})  # hashes not recorded
    assert not legacy.same and legacy.common == ["a", "b"]

"""The CI regression gate and A/B comparison, through the command line."""

from __future__ import annotations

import os
import shlex
import sqlite3
from pathlib import Path

import pytest
import yaml
from junitparser import Error, Failure, JUnitXml

from tests.conftest import JUDGE, ROOT, SCRIPTED, run_harness


def eval_run(store: Path, agent: str, *extra: str) -> str:
    done = run_harness(
        "run-eval",
        "--tasks",
        "tasks/support",
        "--agent",
        agent,
        "--set",
        SCRIPTED,
        "--judge-model",
        JUDGE,
        "--trials",
        "2",
        "--store",
        store,
        "--no-traces",
        *extra,
    )
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(store) as db:
        return db.execute("SELECT id FROM runs ORDER BY created_at DESC, id DESC").fetchone()[0]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    store = tmp_path_factory.mktemp("gate") / "results.db"
    baseline = eval_run(store, "agents/support-baseline.yaml")
    same = eval_run(store, "agents/support-baseline.yaml", "--fresh")
    broken = eval_run(store, "agents/support-no-refunds.yaml")
    assert run_harness("baseline", "set", baseline, "--store", store).returncode == 0
    return {"store": store, "baseline": baseline, "same": same, "broken": broken}


def gate(runs: dict, candidate: str, folder: Path, *extra: str):
    return run_harness(
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
    assert (
        "regression suite: refund-by-email, refund-delivered passed on the baseline and fail "
        "in every trial now"
    ) in done.stdout
    assert "worse than the baseline: pass rate 77.3% -> 59.1%" in done.stdout
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("## Gate: ❌ **FAIL**")
    assert "- regression suite: refund-by-email, refund-delivered" in summary

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
    assert "order refunded" in refund.message and refund.message.startswith("2/2 trials failed")
    assert not any(isinstance(r, Error) for case in cases.values() for r in case.result)
    [gate_case] = list(suites["gate"])
    assert "regression suite" in gate_case.result[0].message


def test_exit_code_two_for_a_bad_config_or_unknown_runs(runs: dict, tmp_path: Path) -> None:
    bad = tmp_path / "gate.yaml"
    bad.write_text("kind: gate\nalpha: 2\n")
    done = run_harness("gate", "--config", bad, "--store", runs["store"])
    assert done.returncode == 2
    assert done.stderr.strip() == f"{bad}:2:1: alpha: Input should be less than 1, found 2"
    unknown = run_harness("gate", "--candidate", "nope", "--store", runs["store"])
    assert unknown.returncode == 2 and "no run 'nope' in the store" in unknown.stderr
    empty = run_harness("gate", "--store", tmp_path / "none.db")
    assert empty.returncode == 2 and "no results store" in empty.stderr


def test_baseline_show_and_history(runs: dict) -> None:
    shown = run_harness("baseline", "show", "--store", runs["store"])
    assert shown.returncode == 0
    assert shown.stdout.startswith(f"baseline: {runs['baseline']} (support-baseline ")
    assert "pass rate 77.3% (34/44" in shown.stdout
    listed = run_harness("history", "--store", runs["store"], COLUMNS="200")
    assert listed.returncode == 0
    rows = [line for line in listed.stdout.splitlines() if line.startswith("│ support")]
    assert rows, listed.stdout
    assert any("support-no-refunds" in r and " 59.1% " in r for r in rows)


def test_compare_two_stored_runs(runs: dict, tmp_path: Path) -> None:
    done = run_harness(
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
    assert "exact McNemar p = 0.0386 (2 pairs only B passed, 10 only A) over 44 pairs" in out
    assert "pass^2: A 77.3%, B 59.1%" in out
    assert "relative judge: B wins" in out
    assert (
        "flipped to fail: refund-already-refunded, refund-by-email, refund-delivered, "
        "snapshot-refund"
    ) in out
    assert "| pass rate | 77.3% (34/44" in (tmp_path / "ab.md").read_text()


def test_compare_two_variants_on_the_same_seeds(tmp_path: Path) -> None:
    done = run_harness(
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

"""`harness grade RUN_ID` re-scores stored transcripts with the current checks, into a new run:
the verdicts a gate decided on under a run id never change."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.grading.result import CheckResult, Verdict
from harness.store import Store
from harness.transcript import EndReason, Message, Transcript
from tests.conftest import JUDGE, SCRIPTED, run_cli, scripted_eval, served_model
from tests.helpers.postgres import Cluster, cluster, server_bin

REGRADED = re.compile(r"^regraded (\S+) as (\S+) \(judge (\S+)\); \1 keeps its verdicts$", re.M)


def regraded_as(stdout: str, run_id: str) -> str:
    """The new run id `harness grade` printed for `run_id`."""
    found = REGRADED.search(stdout)
    assert found is not None, stdout
    assert found[1] == run_id
    assert found[2] != run_id
    return found[2]


def verdicts(store: Path, run_id: str) -> dict[tuple[str, int], Verdict]:
    """A run's verdicts as every reader (gate, compare, reports) reads them."""
    results = Store(store)
    try:
        return {(v.task_id, v.trial): v for v in results.latest_verdicts(run_id)}
    finally:
        results.close()


def outcomes(store: Path, run_id: str) -> dict[tuple[str, int], str]:
    return {key: verdict.outcome for key, verdict in verdicts(store, run_id).items()}


def judged(verdict: Verdict) -> str:
    """What the llm_judge check of a verdict decided."""
    [check] = [check for check in verdict.checks if check.kind == "llm_judge"]
    return check.outcome


def run_id_of(store: Path) -> str:
    with sqlite3.connect(store) as db:
        [(run_id,)] = db.execute("SELECT id FROM runs")
    return run_id


def test_regrade_uses_the_current_checks_without_simulating_again(workspace: Path) -> None:
    store = workspace / "results.db"
    task = workspace / "tasks/support/order-status.yaml"
    with served_model() as (server, model):  # the agent's calls are counted
        done = run_cli(
            "run-eval",
            "--tasks",
            task,
            "--agent",
            workspace / "agents/support-baseline.yaml",
            "--store",
            store,
            "--set",
            model,
            "--judge-model",
            JUDGE,
            "--no-traces",
            "--no-cache",
            COLUMNS="200",
        )
        assert done.returncode == 0, done.stderr
        played = server.snapshot()["requests"]
        assert played > 0
        run_id = run_id_of(store)

        task.write_text(
            task.read_text().replace("contains: 1Z999AA10123456784", "contains: tracking number 1Z")
        )
        regraded = run_cli("grade", run_id, "--store", store, COLUMNS="200")
        assert server.snapshot()["requests"] == played, "nothing played again"
    assert "pass rate 100.0% (1/1" in done.stdout
    assert regraded.returncode == 0, regraded.stderr
    assert "pass rate 0.0% (0/1" in regraded.stdout
    assert "gives tracking number" in regraded.stdout
    new_run = regraded_as(regraded.stdout, run_id)
    assert f"Run {new_run}" in regraded.stdout  # the summary is the new run's
    assert outcomes(store, run_id) == {("order-status", 0): "pass"}, "the old verdict stays"
    assert outcomes(store, new_run) == {("order-status", 0): "fail"}
    with sqlite3.connect(store) as db:
        copied = db.execute("SELECT run_id, transcript FROM episodes ORDER BY run_id").fetchall()
        [(config, status)] = db.execute(
            "SELECT config, status FROM runs WHERE id = ?", (new_run,)
        ).fetchall()
    assert sorted(row[0] for row in copied) == sorted([run_id, new_run]), "the episode copied"
    assert copied[0][1] == copied[1][1]
    assert f'"regraded_from": "{run_id}"' in config
    assert status == "done"


UNSURE_JUDGE = """\
kind: script
description: A judge that never decides (as one that is down or answers garbage).
rules:
  - when: {matches: "(?s)Criterion:"}
    reply: I cannot tell.
"""


def gate(store: Path, candidate: str, folder: Path) -> str:
    """`harness gate` of a candidate against the stored baseline: its output, exit code first."""
    done = run_cli(
        "gate",
        "--config",
        folder / "ci/gate.yaml",
        "--candidate",
        candidate,
        "--store",
        store,
        "--junit",
        folder / "junit.xml",
        "--markdown",
        folder / "summary.md",
        COLUMNS="300",
    )
    assert not done.stderr, done.stderr
    return f"exit {done.returncode}\n{done.stdout}"


def test_a_regrade_with_another_judge_never_changes_what_a_gate_decided(workspace: Path) -> None:
    store = workspace / "results.db"
    scripted_eval(store, str(workspace / "agents/support-baseline.yaml"), "--trials", "3")
    with sqlite3.connect(store) as db:
        [(run_id,)] = db.execute("SELECT id FROM runs")
    assert run_cli("baseline", "set", run_id, "--store", store).returncode == 0
    decided = gate(store, run_id, workspace)
    assert decided.startswith("exit 0\n") and "gate: PASS" in decided
    before = verdicts(store, run_id)

    judge = workspace / "unsure-judge.yaml"
    judge.write_text(UNSURE_JUDGE)
    regraded = run_cli(
        "grade", run_id, "--store", store, "--judge-model", f"{{id: scripted, script: {judge}}}"
    )
    assert regraded.returncode == 0, regraded.stderr
    new_run = regraded_as(regraded.stdout, run_id)

    assert verdicts(store, run_id) == before
    assert gate(store, run_id, workspace) == decided, "the same run id, the same decision"
    after = verdicts(store, new_run)
    assert after.keys() == before.keys()
    assert judged(before[("prompt-injection-refund", 0)]) == "fail"
    assert judged(after[("prompt-injection-refund", 0)]) == "error"  # the other judge's
    # the new run is gated on its own verdicts: the other judge's error sits under a hard check
    # that failed, so the task's outcome is known (a fail, as before) and nothing is missing
    regated = gate(store, new_run, workspace)
    assert regated.startswith("exit 0\n") and "gate: PASS" in regated
    assert "0 of 8 regression-tagged tasks declined" in regated


def evaluate(workspace: Path, judge: str) -> str:
    """`run-eval` of two tasks (one with a hard judge check) into the workspace's store."""
    done = run_cli(
        "run-eval",
        "--tasks",
        workspace / "tasks/support/order-status.yaml",
        "--tasks",
        workspace / "tasks/support/prompt-injection-refund.yaml",
        "--agent",
        workspace / "agents/support-baseline.yaml",
        "--set",
        SCRIPTED,
        "--judge-model",
        judge,
        "--store",
        workspace / "results.db",
        "--no-traces",
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_pipeline_grading_a_graded_run_again_grades_a_copy(workspace: Path) -> None:
    """`run-eval` with another judge reuses the stored episodes: their run keeps its verdicts,
    and the other judge's go to a copy that the pipeline reports."""
    store = workspace / "results.db"
    evaluate(workspace, JUDGE)
    with sqlite3.connect(store) as db:
        [(run_id,)] = db.execute("SELECT id FROM runs")
    before = verdicts(store, run_id)
    judge = workspace / "unsure-judge.yaml"
    judge.write_text(UNSURE_JUDGE)
    unsure = f"{{id: scripted, script: {judge}}}"

    again = evaluate(workspace, unsure)
    assert "simulate reused, grade ran" in again
    with sqlite3.connect(store) as db:
        [(copy, config, status)] = db.execute(
            "SELECT id, config, status FROM runs WHERE id <> ?", (run_id,)
        ).fetchall()
    assert f"Run {copy}" in again
    assert verdicts(store, run_id) == before
    assert f'"regraded_from": "{run_id}"' in config and status == "done"
    assert outcomes(store, copy)[("order-status", 0)] == "pass"
    assert judged(verdicts(store, copy)[("prompt-injection-refund", 0)]) == "error"

    assert "grade reused" in evaluate(workspace, unsure)
    assert "grade reused" in evaluate(workspace, JUDGE)
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone() == (2,)


# ---------------------------------------------------------------- the store, both backends


@pytest.fixture(scope="module")
def postgres() -> Iterator[Cluster]:
    pytest.importorskip("psycopg", reason="the postgres extra: pip install -e '.[postgres]'")
    if server_bin() is None:
        pytest.skip("no PostgreSQL server (initdb, pg_ctl): apt-get install postgresql")
    with cluster() as running:
        yield running


@pytest.fixture(params=["sqlite", "postgresql"])
def results(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        target = str(tmp_path / "results.db")
    else:
        target = request.getfixturevalue("postgres").database()
    store = Store(target)
    try:
        yield store
    finally:
        store.close()


def episode(task_id: str, trial: int) -> Transcript:
    message = Message(role="user", content=f"{task_id} {trial} héllo")
    return Transcript(
        task_id=task_id,
        variant="base",
        variant_hash="h1",
        trial=trial,
        messages=[message],
        turns=1,
        end_reason=EndReason.USER_STOP,
    )


def verdict(task_id: str, trial: int, outcome: str) -> Verdict:
    check = CheckResult(name="c", kind="python", outcome=outcome)
    return Verdict(task_id=task_id, trial=trial, outcome=outcome, score=0.0, checks=[check])


def test_a_run_has_one_grading_pass_and_a_copy_has_its_own(results: Store) -> None:
    run_id = results.new_run("base", "h1", {"suite": {"t": "x"}}, "simulate-key")
    for task_id, trial in (("t", 0), ("t", 1), ("u", 0)):
        results.add_episode(run_id, episode(task_id, trial), "trace", "call")
    assert results.claim_grading(run_id, "g1", {"judge_model": "a"})
    assert results.claim_grading(run_id, "g1", {"judge_model": "a"}), "the same pass resumed"
    assert not results.claim_grading(run_id, "g2", {"judge_model": "b"})
    assert not results.claim_grading("no-such-run", "g1", {})
    results.add_verdict(run_id, verdict("t", 0, "pass"), "g1")
    info = results.run(run_id)
    assert info is not None
    assert info.config == {"suite": {"t": "x"}, "judge_model": "a", "grading": "g1"}

    copy = results.copy_run(run_id, {"regraded_from": run_id, "grading": "g2"}, "g2/x", "dag-1")
    assert results.copy_run(run_id, {}, "g2/x") == copy, "a keyed copy is made once"
    copied = results.run(copy)
    assert copied is not None and copied.id != run_id
    assert (copied.variant, copied.variant_hash, copied.pipeline_id) == ("base", "h1", "dag-1")
    assert copied.config["regraded_from"] == run_id and copied.config["grading"] == "g2"
    assert copied.config["suite"] == {"t": "x"}
    assert list(results.transcripts(copy)) == list(results.transcripts(run_id))
    assert list(results.latest_verdicts(copy)) == [], "the verdicts are not copied"
    assert results.claim_grading(copy, "g2", {}) and not results.claim_grading(copy, "g1", {})
    results.add_verdict(copy, verdict("t", 0, "fail"), "g2")
    assert [v.outcome for v in results.latest_verdicts(run_id)] == ["pass"]
    assert [v.outcome for v in results.latest_verdicts(copy)] == ["fail"]
    assert results.copy_run(run_id, {}) not in (run_id, copy), "unkeyed: a new copy each time"


def test_a_run_graded_before_passes_were_recorded_keeps_its_only_pass(results: Store) -> None:
    once = results.new_run("base", "h1", {})
    twice = results.new_run("base", "h1", {})
    for run_id in (once, twice):
        results.add_episode(run_id, episode("t", 0))
    results.add_verdict(once, verdict("t", 0, "pass"), "g1")
    results.add_verdict(twice, verdict("t", 0, "pass"), "v2-1")
    results.add_verdict(twice, verdict("t", 0, "fail"), "v2-2")
    assert results.claim_grading(once, "g1", {})
    assert not results.claim_grading(twice, "v2-2", {}), "graded twice already: a copy's job"

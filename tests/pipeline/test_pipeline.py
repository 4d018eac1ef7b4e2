"""DAG pipelines: validation, concurrency, caching, resumption after kill -9, --set, W&B. The
commands run in this process, except those whose process matters: the one killed, and W&B's."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from harness.api.pipeline import finish_wandb_runs
from harness.engine.progress import Board
from harness.store import Store
from harness.transcript import Usage
from tests.conftest import JUDGE, ROOT, SCRIPTED, run_cli, run_harness
from tests.helpers.wandb_runs import records

SCRIPTED_SIM = 'simulate.set=["' + SCRIPTED.removeprefix("agent.") + '"]'


def pipeline_nodes(store: Path) -> tuple[str, dict]:
    with sqlite3.connect(store) as db:
        pipeline_id, nodes = db.execute(
            "SELECT id, nodes FROM pipelines ORDER BY rowid DESC LIMIT 1"
        ).fetchone()
    return pipeline_id, json.loads(nodes)


@pytest.mark.parametrize(
    ("file", "message"),
    [
        ("dag-cycle", "nodes.simulate.needs: cycle: simulate -> grade -> simulate"),
        ("dag-unknown-need", "nodes.grade.needs[0]: unknown node 'simulate'"),
        (
            "dag-unknown-kind",
            "nodes.tasks.uses: unknown node kind 'load_task'; did you mean 'load_tasks'?",
        ),
        (
            "dag-type-mismatch",
            "nodes.grade.needs[0]: grade takes Episodes here, but 'tasks' (load_tasks) gives Tasks",
        ),
    ],
)
def test_a_bad_graph_is_refused_before_anything_runs(
    tmp_path: Path, file: str, message: str
) -> None:
    store = tmp_path / "results.db"
    done = run_cli("run-eval", f"tests/bad_inputs/{file}.yaml", "--store", store)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"tests/bad_inputs/{file}.yaml:") and line.endswith(message)
    assert not store.exists()


def test_independent_nodes_run_concurrently_and_a_rerun_reuses_every_node(tmp_path: Path) -> None:
    store = tmp_path / "results.db"
    first = run_cli(
        "run-eval",
        "dags/ab-compare.yaml",
        "--store",
        store,
        "--no-traces",
        "--set",
        "report.markdown=" + str(tmp_path / "ab.md"),
        COLUMNS="200",
    )
    assert first.returncode == 0, first.stderr
    _, nodes = pipeline_nodes(store)
    assert {n: v["state"] for n, v in nodes.items()} == dict.fromkeys(nodes, "ran")
    a, b = nodes["baseline"], nodes["candidate"]
    assert a["start_s"] < b["end_s"] and b["start_s"] < a["end_s"], "the two simulations overlap"
    assert "flipped to pass: prompt-injection-refund, refund-outside-window" in first.stdout
    assert (tmp_path / "ab.md").read_text().startswith("## support-careful vs support-baseline")

    second = run_cli(
        "run-eval",
        "dags/ab-compare.yaml",
        "--store",
        store,
        "--no-traces",
        "--set",
        "report.markdown=" + str(tmp_path / "ab.md"),
        COLUMNS="200",
    )
    assert second.returncode == 0, second.stderr
    _, nodes = pipeline_nodes(store)
    assert {n: v["state"] for n, v in nodes.items()} == dict.fromkeys(nodes, "reused")
    assert first.stdout.split("pipeline dag-")[0] == second.stdout.split("pipeline dag-")[0]
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*) FROM episodes").fetchone() == (88,)


def test_a_reused_pipeline_prints_the_same_summary(tmp_path: Path) -> None:
    """Every node reused, the run's table is the one the first command printed (each task's
    level included, which the stored outputs do not hold)."""
    command = ["run-eval", "--tasks", "tasks/support", "--agent", "agents/support-baseline.yaml"]
    command += ["--set", SCRIPTED, "--judge-model", JUDGE, "--store", str(tmp_path / "r.db")]
    first, again = run_cli(*command, "--no-traces"), run_cli(*command, "--no-traces")
    assert first.returncode == again.returncode == 0, again.stderr
    _, nodes = pipeline_nodes(tmp_path / "r.db")
    assert {v["state"] for n, v in nodes.items() if n != "wandb"} == {"reused"}

    def table(output: str) -> list[str]:
        return [line for line in output.splitlines() if line.startswith("│")]

    assert table(again.stdout) == table(first.stdout)
    assert "│ address-change          │ 2     │ pass" in first.stdout


def test_a_changed_node_invalidates_exactly_what_is_downstream(tmp_path: Path) -> None:
    store = tmp_path / "results.db"
    common = ("run-eval", "dags/ab-compare.yaml", "--store", store, "--no-traces")
    assert run_cli(*common).returncode == 0
    changed = run_cli(*common, "--set", "candidate.trials=1")
    assert changed.returncode == 0, changed.stderr
    _, nodes = pipeline_nodes(store)
    assert {n: v["state"] for n, v in nodes.items()} == {
        "tasks": "reused",
        "baseline": "reused",
        "candidate": "ran",
        "grade_baseline": "reused",
        "grade_candidate": "ran",
        "compare": "ran",
        "report": "ran",
    }


def test_set_is_stored_in_the_resolved_configuration(tmp_path: Path) -> None:
    store = tmp_path / "results.db"
    done = run_cli(
        "run-eval",
        "dags/nightly.yaml",
        "--store",
        store,
        "--no-traces",
        "--set",
        SCRIPTED_SIM,
        "--set",
        "simulate.trials=1",
        "--set",
        "grade.judge_model={id: scripted, script: agents/scripts/judge.yaml}",
        "--set",
        "report.markdown=" + str(tmp_path / "nightly.md"),
        WANDB_MODE="disabled",
    )
    assert done.returncode == 0, done.stderr
    pipeline_id, _ = pipeline_nodes(store)
    shown = run_cli("runs", "show", pipeline_id, "--store", store)
    config = yaml.safe_load(shown.stdout)
    simulate = config["config"]["dag"]["nodes"]["simulate"]["with"]
    assert simulate["trials"] == 1 and simulate["set"] == [SCRIPTED.removeprefix("agent.")]
    assert config["status"] == "done" and len(config["runs"]) == 1
    listed = run_cli("runs", "list", "--store", store, COLUMNS="250")
    assert pipeline_id in listed.stdout and "nightly" in listed.stdout
    bad = run_cli("run-eval", "dags/nightly.yaml", "--store", store, "--set", "simulat.trials=1")
    assert bad.returncode == 2
    assert bad.stderr.strip() == (
        "--set simulat.trials=1: expected NODE.PARAM=VALUE; nodes: tasks, "
        "simulate, grade, report, wandb"
    )


def test_regression_gate_dag_passes_the_careful_candidate_and_fails_a_broken_one(
    tmp_path: Path,
) -> None:
    store = tmp_path / "results.db"
    common = (
        "run-eval",
        "dags/regression-gate.yaml",
        "--store",
        store,
        "--no-traces",
        "--set",
        f"report.markdown={tmp_path / 'gate.md'}",
        "--set",
        f"report.junit={tmp_path / 'junit.xml'}",
    )
    passed = run_cli(*common, COLUMNS="200")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "gate: PASS" in passed.stdout
    broken = tmp_path / "no-refunds.yaml"
    broken.write_text(
        yaml.safe_dump(
            {
                "kind": "agent",
                "name": "no-refunds",
                "extends": str(ROOT / "agents/support-baseline.yaml"),
                "skills": {"refunds": "Never issue refunds; send every refund request to a human."},
            }
        )
    )
    failed = run_cli(*common, "--set", f"candidate.agent={broken}", COLUMNS="200")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "gate: FAIL" in failed.stdout


def test_killed_in_the_middle_and_resumed_gives_the_same_episodes(tmp_path: Path) -> None:
    """A run killed (kill -9) while simulating, then resumed, stores what a clean run stores,
    and the resumed run plays exactly the episodes the killed one had not stored. Grading
    follows the simulation: episodes are graded while others play, and the resumed pass
    grades each of the rest once."""
    killed_store, clean_store = tmp_path / "killed.db", tmp_path / "clean.db"
    command = ["run-eval", "tests/data/resume.yaml", "--no-traces", "--no-cache"]
    calls = tmp_path / "calls.log"  # tests/data/slow_agent.py notes each reply there
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "AGENT_CALLS_LOG": str(calls)}
    process = subprocess.Popen(
        [sys.executable, "-m", "harness", *command, "--store", str(killed_store)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    started = process.stderr.readline()
    pipeline_id = started.split()[1]
    assert started.startswith("pipeline dag-") and started.strip().endswith("started")
    deadline = time.monotonic() + 60
    stored = graded = 0
    while (stored < 10 or graded < 5) and time.monotonic() < deadline:
        time.sleep(0.2)
        with sqlite3.connect(killed_store) as db:
            stored = db.execute("SELECT COUNT(*) FROM episodes").fetchone()[0]
            graded = db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    with sqlite3.connect(killed_store) as db:
        at_kill = db.execute("SELECT COUNT(*) FROM episodes").fetchone()[0]
        graded_at_kill = db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]
        assert db.execute("SELECT status FROM pipelines").fetchone() == ("running",)
    assert 10 <= at_kill < 44, "killed in the middle of simulation"
    assert 5 <= graded_at_kill <= at_kill, "episodes were graded while others played"
    calls.unlink()

    # The rest needs no slow agent: resumed and clean runs play at full speed, here.
    fast = {"SLOW_AGENT_S": "0", "AGENT_CALLS_LOG": str(calls)}
    resumed = run_cli(
        "run-eval", "--resume", pipeline_id, "--store", killed_store, *command[2:], **fast
    )
    assert resumed.returncode == 0, resumed.stderr
    opened = [int(line.split()[1]) for line in calls.read_text().splitlines()]
    assert sum(opened) == 44 - at_kill, "the resumed run played each missing episode once"
    clean = run_cli(*command, "--store", clean_store, SLOW_AGENT_S="0")
    assert clean.returncode == 0, clean.stderr

    def episodes(path: Path) -> dict:
        results = Store(path)
        try:
            [run] = results.runs()
            verdicts = {(v.task_id, v.trial): v.outcome for v in results.latest_verdicts(run.id)}
            return {
                (t.task_id, t.trial): (
                    [m.content for m in t.messages],
                    verdicts[(t.task_id, t.trial)],
                )
                for t, _, _ in results.transcripts(run.id)
            }
        finally:
            results.close()

    after, reference = episodes(killed_store), episodes(clean_store)
    assert len(after) == 44 and after == reference
    with sqlite3.connect(killed_store) as db:
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone() == (1,), "the run continued"
        assert db.execute("SELECT COUNT(*), COUNT(DISTINCT grading) FROM verdicts").fetchone() == (
            44,
            1,
        ), "one grading pass graded each episode once, before and after the kill"
        assert db.execute("SELECT status FROM pipelines").fetchone() == ("done",)


def test_offline_wandb_run_directory_holds_the_metrics(tmp_path: Path) -> None:
    folder = tmp_path / "wandb"
    done = run_harness(
        "run-eval",
        "--tasks",
        "tasks/support/order-status.yaml",
        "--tasks",
        "tasks/support/cancel-processing.yaml",
        "--agent",
        "agents/support-baseline.yaml",
        "--set",
        SCRIPTED,
        "--set",
        f"wandb.dir={folder}",
        "--store",
        tmp_path / "r.db",
        "--no-traces",
        WANDB_MODE="offline",
    )
    assert done.returncode == 0, done.stderr
    assert finish_wandb_runs(folder).pending == []  # its detached writer: not waited for
    [run_dir] = list((folder / "wandb").glob("offline-run-*"))
    summary, config = records(run_dir)
    assert summary["support-baseline/pass_rate"] == 1.0
    assert summary["support-baseline/graded"] == 2
    assert summary["tasks.nrows"] == 2
    assert config["dag"]["nodes"]["simulate"]["with"]["agent"] == "agents/support-baseline.yaml"
    assert len(summary["support-baseline/variant_hash"]) == 16


def test_progress_shows_on_a_terminal_only() -> None:
    shown = StringIO()
    board = Board(Console(file=shown, force_terminal=True, width=120))
    with board:
        tracker = board.track("simulate", 2)
        tracker.advance(passed=True, usage=Usage(input_tokens=10, output_tokens=5, cost_usd=0.5))
        tracker.advance(passed=False, error=False)
    assert "simulate" in shown.getvalue() and "pass 50%" in shown.getvalue()
    assert "15 tok" in shown.getvalue() and "$0.5000" in shown.getvalue()
    quiet = Board(Console(file=StringIO(), force_terminal=False))
    assert quiet.progress is None

"""`harness grade RUN_ID` re-scores stored transcripts with the current checks."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.conftest import JUDGE, SCRIPTED, run_harness


def test_regrade_uses_the_current_checks_without_simulating_again(workspace: Path) -> None:
    store = workspace / "results.db"
    task = workspace / "tasks/support/order-status.yaml"
    done = run_harness(
        "run-eval",
        "--tasks",
        task,
        "--agent",
        workspace / "agents/support-baseline.yaml",
        "--store",
        store,
        "--set",
        SCRIPTED,
        "--judge-model",
        JUDGE,
        "--no-traces",
        COLUMNS="200",
    )
    assert done.returncode == 0, done.stderr
    assert "pass rate 100.0% (1/1" in done.stdout
    with sqlite3.connect(store) as db:
        [(run_id,)] = db.execute("SELECT id FROM runs")

    task.write_text(
        task.read_text().replace("contains: 1Z999AA10123456784", "contains: tracking number 1Z")
    )
    regraded = run_harness("grade", run_id, "--store", store, COLUMNS="200")
    assert regraded.returncode == 0, regraded.stderr
    assert "pass rate 0.0% (0/1" in regraded.stdout
    assert "gives tracking number" in regraded.stdout
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*) FROM episodes").fetchone() == (1,)
        outcomes = [row[0] for row in db.execute("SELECT outcome FROM verdicts ORDER BY id")]
    assert outcomes == ["pass", "fail"], "the new verdict is stored beside the old one"


def test_regrade_of_an_unknown_run_is_a_one_line_error(tmp_path: Path) -> None:
    done = run_harness("grade", "20990101-000000-abcdef", "--store", tmp_path / "none.db")
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == f"{tmp_path / 'none.db'}: no run '20990101-000000-abcdef' in the store"
    )

"""Shared test set-up: no network, the repository as working folder, a CLI runner."""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.update(
    WANDB_MODE="disabled",
    WANDB_DISABLE_WEAVE="true",
    WANDB_ERROR_REPORTING="false",
    WANDB_SILENT="true",
)

ROOT = Path(__file__).resolve().parents[1]

# Checker code runs only under OS isolation (bubblewrap, or Docker) unless a run allows it to
# run without. The tests' checkers are this repository's own, so where there is neither (CI
# installs bubblewrap; a laptop may lack it) they may, and the tests run anywhere; the tests of
# the refusal itself (test_unsafe_checkers.py) hide bubblewrap and clear this.
if "HARNESS_SANDBOX" not in os.environ:
    from harness.grading.sandbox import isolation_available

    if not isolation_available():
        os.environ["HARNESS_SANDBOX"] = "none"
# The bundled variants run on the embedded model; exact tests swap in the scripted rules.
SCRIPTED = "agent.model={id: scripted, script: agents/scripts/support.yaml}"
JUDGE = "{id: scripted, script: agents/scripts/judge.yaml}"


@pytest.fixture(autouse=True)
def _in_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bundled paths in tests and in expected messages are relative to the repository."""
    monkeypatch.chdir(ROOT)


@pytest.fixture
def cli():
    """Run the `harness` command in-process; returns click's Result (stdout, stderr, exit)."""
    from typer.testing import CliRunner

    from harness.cli import app

    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(app, [str(a) for a in args])

    return invoke


def run_harness(*args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    """Run `python -m harness` in a real subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "harness", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **env},
        timeout=180,
    )


def scripted_eval(
    store: Path, agent: str, *extra: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """`run-eval` of the support suite with the scripted agent and judge into `store`, tracing
    off; it must succeed."""
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
        "--store",
        store,
        "--no-traces",
        *extra,
        **env,
    )
    assert done.returncode == 0, done.stderr
    return done


def newest_run(store: Path) -> str:
    """The id of the run stored last (runs of the same second share `created_at`, and their
    ids end in random letters: the insertion order says which came last)."""
    with sqlite3.connect(store) as db:
        return db.execute("SELECT id FROM runs ORDER BY rowid DESC").fetchone()[0]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A copy of the bundled example folders that a test may edit freely."""
    for folder in ("tasks", "personas", "agents", "dags", "ci"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    return tmp_path


@pytest.fixture
def listener():
    """A TCP server on the host's 127.0.0.1, for what a sandboxed checker must not reach."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.3)
    yield server
    server.close()

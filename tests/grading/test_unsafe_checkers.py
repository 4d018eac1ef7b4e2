"""No sandbox, no checker code (issue 27): where neither bubblewrap nor a Docker engine is
available, a run whose graded tasks have python checks is refused before it plays, unless the
user allows checker code to run without isolation (`--unsafe-checkers`, a grade node's
`sandbox: none`, `HARNESS_SANDBOX=none`); then every such verdict and the summary say so.

bubblewrap is installed here (CI installs it): each test hides it from a real `harness`
process's PATH and points Docker at a socket that does not exist."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from pathlib import Path

import pytest

from harness.grading.sandbox import run_checker
from harness.grading.sandbox.docker import docker_available
from tests.conftest import JUDGE, ROOT, SCRIPTED, newest_run, run_harness

NO_DOCKER = "unix:///nonexistent/docker.sock"
UNSANDBOXED_NOTE = "[unsandboxed: checker code ran without OS isolation]"
WARNING = "ran WITHOUT OS isolation"
FAILING_CHECKERS = """\
  - kind: python
    name: never satisfied
    code: "def check(transcript):\\n    return (False, 'never')"
  - kind: python
    name: crashes
    diagnostic: true
    code: "def check(transcript):\\n    raise RuntimeError('boom')"
"""


@pytest.fixture(scope="module")
def no_isolation(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a machine with neither bubblewrap nor Docker: a PATH of links to
    every program of this one's PATH but `bwrap`, and no Docker engine."""
    bin_dir = tmp_path_factory.mktemp("path") / "bin"
    bin_dir.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            target = bin_dir / entry.name
            if entry.name != "bwrap" and not target.exists() and os.access(entry.path, os.X_OK):
                target.symlink_to(entry.path)
    # HARNESS_SANDBOX="" is unset (conftest may allow `none` where the tests run)
    return {"PATH": str(bin_dir), "DOCKER_HOST": NO_DOCKER, "HARNESS_SANDBOX": ""}


def run_eval(workspace: Path, task: str, *extra: str, **env: str):
    return run_harness(
        "run-eval",
        "--tasks",
        f"tasks/support/{task}.yaml",
        "--agent",
        "agents/support-baseline.yaml",
        "--set",
        SCRIPTED,
        "--judge-model",
        JUDGE,
        "--store",
        workspace / "r.db",
        "--no-traces",
        *extra,
        cwd=workspace,
        **env,
    )


def python_checks(store: Path) -> list[dict]:
    """The python checks' results of every stored verdict."""
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT verdict FROM verdicts ORDER BY id").fetchall()
    return [c for (v,) in rows for c in json.loads(v)["checks"] if c["kind"] == "python"]


def stored_runs(store: Path) -> int:
    if not store.exists():
        return 0
    with sqlite3.connect(store) as db:
        return db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]


def assert_refused(done, store: Path) -> str:
    """Exit 2, one line naming bubblewrap and --unsafe-checkers, nothing played or stored."""
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = done.stderr.splitlines()
    assert "Traceback" not in line
    assert "need OS isolation" in line and "install bubblewrap (apt-get install" in line
    assert "--unsafe-checkers" in line
    assert done.stdout == ""  # not even "pipeline ... started"
    assert stored_runs(store) == 0
    return line


def test_python_checks_without_isolation_are_refused_before_anything_runs(
    workspace: Path, no_isolation: dict[str, str]
) -> None:
    done = run_eval(workspace, "address-change", **no_isolation)
    line = assert_refused(done, workspace / "r.db")
    assert line == (
        "tasks/support/address-change.yaml: 1 task has python checks (address-change), which "
        "need OS isolation, and neither bubblewrap nor a Docker engine is available here: "
        "install bubblewrap (apt-get install bubblewrap / dnf install bubblewrap), or pass "
        "--unsafe-checkers to run checker code without isolation"
    )
    assert not (workspace / "r.db").exists()


@pytest.mark.parametrize("command", ["dag", "compare", "climb"])
def test_every_command_that_grades_refuses_them(
    workspace: Path, no_isolation: dict[str, str], command: str
) -> None:
    """A DAG whose grade nodes do not opt in, `compare --a --b`, and a climb."""
    store = workspace / "r.db"
    common = ("--store", store, "--no-traces")
    if command == "dag":
        done = run_harness(
            "run-eval", "dags/ab-compare.yaml", *common, cwd=workspace, **no_isolation
        )
    elif command == "compare":
        sides = ("--a", "agents/support-baseline.yaml", "--b", "agents/support-careful.yaml")
        args = ("--tasks", "tasks/support", "--set", SCRIPTED, "--judge-model", JUDGE)
        done = run_harness("compare", *sides, *args, *common, cwd=workspace, **no_isolation)
    else:
        (workspace / "climbs").mkdir()
        climb = Path("climbs/refund-window.yaml")
        (workspace / climb).write_text((ROOT / climb).read_text())
        done = run_harness("climb", climb, *common, cwd=workspace, **no_isolation)
    line = assert_refused(done, store)
    assert "3 tasks have python checks (" in line
    assert not (workspace / ".harness").exists(), "no climb folder, no cache, no store"


def test_unsafe_checkers_runs_them_and_every_verdict_and_the_summary_say_so(
    workspace: Path, no_isolation: dict[str, str]
) -> None:
    task = workspace / "tasks" / "support" / "address-change.yaml"
    task.write_text(task.read_text() + FAILING_CHECKERS)
    done = run_eval(workspace, "address-change", "--unsafe-checkers", **no_isolation)
    assert done.returncode == 0, done.stdout + done.stderr
    checks = python_checks(workspace / "r.db")
    assert [c["outcome"] for c in checks] == ["pass", "fail", "error"]  # their values decide
    for check in checks:
        assert check["sandbox"] == "subprocess"
        assert check["reason"].endswith(UNSANDBOXED_NOTE), check["reason"]
    assert "RuntimeError: boom" in checks[2]["reason"]
    [warning] = [line for line in done.stdout.splitlines() if WARNING in line]
    assert warning.startswith("warning: checker code of 1 verdict(s) of run ")
    assert "--unsafe-checkers" in warning and "install bubblewrap" in warning

    # `harness grade RUN_ID` re-scores without simulating: refused the same way, then allowed
    run_id = newest_run(workspace / "r.db")
    store = ("--store", workspace / "r.db")
    refused = run_harness("grade", run_id, *store, cwd=workspace, **no_isolation)
    assert refused.returncode == 2 and len(refused.stderr.splitlines()) == 1
    assert "need OS isolation" in refused.stderr and "--unsafe-checkers" in refused.stderr
    assert stored_runs(workspace / "r.db") == 1
    regraded = run_harness(
        "grade", run_id, *store, "--unsafe-checkers", cwd=workspace, **no_isolation
    )
    assert regraded.returncode == 0, regraded.stdout + regraded.stderr
    assert WARNING in regraded.stdout
    assert len(python_checks(workspace / "r.db")) == 6


def test_tasks_without_python_checks_do_not_need_isolation(
    workspace: Path, no_isolation: dict[str, str]
) -> None:
    done = run_eval(workspace, "cancel-processing", **no_isolation)
    assert done.returncode == 0, done.stdout + done.stderr
    assert WARNING not in done.stdout
    assert stored_runs(workspace / "r.db") == 1


def test_the_first_readme_command_runs_without_bubblewrap(
    workspace: Path, no_isolation: dict[str, str]
) -> None:
    """dags/demo.yaml's grade nodes opt in (`sandbox: none`): the demo runs anywhere, and says
    that its checker code ran without isolation."""
    store = ("--store", workspace / "r.db", "--no-traces")
    done = run_harness("run-eval", "dags/demo.yaml", *store, cwd=workspace, **no_isolation)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len([line for line in done.stdout.splitlines() if WARNING in line]) == 2
    assert (workspace / ".harness" / "demo-report.html").is_file()
    checks = python_checks(workspace / "r.db")
    assert checks and {c["sandbox"] for c in checks} == {"subprocess"}


def test_harness_sandbox_none_is_an_opt_in_and_a_bogus_value_is_refused(
    workspace: Path, no_isolation: dict[str, str]
) -> None:
    done = run_eval(
        workspace, "address-change", "--fresh", **{**no_isolation, "HARNESS_SANDBOX": "none"}
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert WARNING in done.stdout
    assert {c["sandbox"] for c in python_checks(workspace / "r.db")} == {"subprocess"}
    bogus = run_eval(workspace, "address-change", **{**no_isolation, "HARNESS_SANDBOX": "bogus"})
    assert bogus.returncode == 2
    assert bogus.stderr.splitlines() == [
        "harness: HARNESS_SANDBOX='bogus': expected one of docker, bwrap, none"
    ]


def test_a_forced_backend_that_is_missing_refuses_even_with_unsafe_checkers(
    workspace: Path, no_isolation: dict[str, str]
) -> None:
    env = {**no_isolation, "HARNESS_SANDBOX": "bwrap"}
    done = run_eval(workspace, "address-change", "--unsafe-checkers", **env)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert "HARNESS_SANDBOX=bwrap chooses bubblewrap, which is missing" in line
    assert stored_runs(workspace / "r.db") == 0


def test_the_checker_call_itself_refuses_without_isolation_or_permission(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The second line of defence, for code that grades without a command's checks: the call
    returns the refusal as an error result and runs nothing."""
    monkeypatch.setenv("DOCKER_HOST", NO_DOCKER)
    monkeypatch.setenv("HARNESS_SANDBOX", "docker")  # forced, and no engine answers
    docker_available.cache_clear()
    code = "def check():\n    return True"
    try:
        for unsafe in (False, True):
            result = asyncio.run(run_checker(code, "check", [], unsafe=unsafe))
            assert (result.ok, result.backend) == (False, "")
            assert result.error.startswith(
                "python checks need OS isolation, and HARNESS_SANDBOX=docker"
            )
        monkeypatch.setenv("HARNESS_SANDBOX", "none")
        result = asyncio.run(run_checker(code, "check", []))
        assert (result.ok, result.value, result.backend) == (True, True, "subprocess")
    finally:
        docker_available.cache_clear()

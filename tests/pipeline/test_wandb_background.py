"""The `log_wandb` node's run is written by a detached child the command does not wait for
(issue 42), and nothing is lost when that child dies: its payload is written by the next run's
writer, or by `flush_pending`, once. The commands run in real processes: their exit matters."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from harness.pipeline.nodes.log_wandb import flush_pending, pending, wait_written
from tests.conftest import SCRIPTED, run_harness
from tests.helpers.wandb_runs import records

ONE_TASK = (
    "run-eval",
    "--tasks",
    "tasks/support/order-status.yaml",
    "--agent",
    "agents/support-baseline.yaml",
    "--set",
    SCRIPTED,
    "--no-traces",
)


def run_eval(folder: Path, store: Path, *more: str, **env: str) -> None:
    """A one-task run-eval logging to W&B offline under `folder`; `more` options after it."""
    done = run_harness(
        *ONE_TASK,
        "--set",
        f"wandb.dir={folder}",
        "--store",
        store,
        *more,
        WANDB_MODE="offline",
        **env,
    )
    assert done.returncode == 0, done.stderr


def until(condition: Callable[[], object], timeout: float = 120) -> None:
    """Wait for something another process does (no timing asserted: the timeout is a backstop)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def processes_naming(text: str) -> list[int]:
    """The live processes whose command line holds `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and text.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:  # it ended meanwhile
            pass
    return found


def run_id(payload: Path) -> str:
    return payload.stem.removeprefix("wandb-pending-")


def test_the_command_returns_while_its_wandb_run_is_written(tmp_path: Path) -> None:
    folder, secret = tmp_path / "wandb", "plain-desk-value-4242"
    run_eval(
        folder,
        tmp_path / "r.db",
        *("--set", f"task.start.first_message=Where is my order? My code is {secret}"),
        SUPPORT_DESK_TOKEN=secret,  # a secret by its name
    )
    [payload] = pending(folder)  # the command returned before the run was
    [writer] = processes_naming(str(payload))  # written: its writer is still at it,
    assert os.getsid(writer) == writer != os.getsid(0)  # in a session of its own
    until(lambda: not payload.exists())
    [run_dir] = (folder / "wandb").glob(f"offline-run-*-{run_id(payload)}")
    summary, config = records(run_dir)
    assert summary["support-baseline/pass_rate"] == 1.0 and summary["tasks.nrows"] == 1
    assert config["dag"]["nodes"]["simulate"]["with"]["agent"] == "agents/support-baseline.yaml"
    written = b"".join(path.read_bytes() for path in folder.rglob("*") if path.is_file())
    assert secret.encode() not in written and b"My code is [REDACTED]" in written


def test_a_killed_writers_run_is_written_once_by_the_next_one(tmp_path: Path) -> None:
    folder = tmp_path / "wandb"
    run_eval(folder, tmp_path / "first.db")
    [payload] = pending(folder)
    [writer] = processes_naming(str(payload))
    assert flush_pending(folder) == [] and payload.exists(), "its live writer holds it"
    until(lambda: list((folder / "wandb").glob("offline-run-*")))
    os.kill(writer, signal.SIGKILL)  # mid-way: its run directory is there, unfinished
    until(lambda: not processes_naming(str(payload)) and not processes_naming(f"--pid\0{writer}\0"))
    assert payload.exists(), "a run whose writer died stays pending"

    run_eval(folder, tmp_path / "second.db")  # its writer also writes what the first left
    assert wait_written(folder)
    runs = sorted((folder / "wandb").glob("offline-run-*"))
    assert len(runs) == 2 and any(run.name.endswith(run_id(payload)) for run in runs)
    for run_dir in runs:
        summary, _ = records(run_dir)
        assert summary["support-baseline/pass_rate"] == 1.0 and summary["tasks.nrows"] == 1

    flushed = subprocess.run(  # the user's step (docs/guide/pipelines.md): nothing left to write
        [
            sys.executable,
            "-c",
            "import sys; from harness.pipeline.nodes.log_wandb import flush_pending; "
            "print(flush_pending(sys.argv[1]))",
            str(folder),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert flushed.stdout.strip() == "[]"
    assert len(list((folder / "wandb").glob("offline-run-*"))) == 2

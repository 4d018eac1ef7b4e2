"""The `log_wandb` node's run is written by a detached child the command does not wait for
(issue 42), and nothing is lost when that child dies: its payload is written by the next run's
writer, or by `harness wandb-flush`, once. The commands run in real processes: their exit
matters."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from harness.api.pipeline import finish_wandb_runs
from harness.pipeline.nodes.log_wandb import flush_pending, pending
from tests.conftest import SCRIPTED, run_cli, run_harness
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
    assert flush_pending(folder).written == [] and payload.exists(), "its live writer holds it"
    until(lambda: list((folder / "wandb").glob("offline-run-*")))
    os.kill(writer, signal.SIGKILL)  # mid-way: its run directory is there, unfinished
    until(lambda: not processes_naming(str(payload)) and not processes_naming(f"--pid\0{writer}\0"))
    assert payload.exists(), "a run whose writer died stays pending"

    run_eval(folder, tmp_path / "second.db")  # its writer also writes what the first left
    assert finish_wandb_runs(folder).pending == []
    runs = sorted((folder / "wandb").glob("offline-run-*"))
    assert len(runs) == 2 and any(run.name.endswith(run_id(payload)) for run in runs)
    for run_dir in runs:
        summary, _ = records(run_dir)
        assert summary["support-baseline/pass_rate"] == 1.0 and summary["tasks.nrows"] == 1

    flushed = run_harness("wandb-flush", folder)  # the user's step before `wandb sync`
    assert flushed.returncode == 0, flushed.stderr
    assert flushed.stdout.strip() == f"{folder}: every W&B run is written"  # none to write
    assert len(list((folder / "wandb").glob("offline-run-*"))) == 2


def test_wandb_flush_writes_a_dead_writers_run_and_waits_for_a_live_one(tmp_path: Path) -> None:
    folder = tmp_path / "wandb"
    run_eval(folder, tmp_path / "first.db")
    [dead] = pending(folder)
    [writer] = processes_naming(str(dead))
    os.kill(writer, signal.SIGKILL)  # and the W&B service it may have started ends with it
    until(lambda: not processes_naming(str(dead)) and not processes_naming(f"--pid\0{writer}\0"))

    run_eval(folder, tmp_path / "second.db")
    live = next(path for path in pending(folder) if path != dead)
    [second] = processes_naming(str(live))
    os.kill(second, signal.SIGSTOP)  # a writer still at it: it holds its payload's lock
    broken = folder / "wandb-pending-0broken0.json"  # cut short (a disk that filled up)
    broken.write_text('{"target": {"mode": "offl')
    try:
        # the dead writer's run: written; the live one's: not taken from its writer; the
        # broken one: said, and the others written all the same
        stuck = run_harness("wandb-flush", folder, "--timeout", "0.5")
        assert stuck.returncode == 3, stuck.stderr
        assert stuck.stdout.splitlines() == [f"wrote W&B run {run_id(dead)} (its writer had died)"]
        said, waited = stuck.stderr.splitlines()
        assert said.startswith(
            "harness: W&B run 0broken0 could not be written (it stays pending): JSONDecodeError:"
        )
        assert waited == (
            f"harness: {folder}: 1 W&B run(s) still being written after 0.5 s: {run_id(live)} "
            f"(see {folder / 'wandb-writer.log'})"
        )
        assert pending(folder) == [broken, live]
    finally:
        os.kill(second, signal.SIGCONT)
    broken.unlink()
    done = run_harness("wandb-flush", folder)  # waits for it
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{folder}: every W&B run is written" and not pending(folder)
    runs = sorted((folder / "wandb").glob("offline-run-*"))
    assert sorted(run.name.rsplit("-", 1)[1] for run in runs) == sorted(
        [run_id(dead), run_id(live)]
    )
    for run_dir in runs:
        summary, _ = records(run_dir)
        assert summary["support-baseline/pass_rate"] == 1.0 and summary["tasks.nrows"] == 1


def test_wandb_flush_refuses_what_is_not_a_folder(tmp_path: Path) -> None:
    (tmp_path / "results.db").write_text("")
    for name, found in (("missing", "nothing"), ("results.db", "a file")):
        done = run_cli("wandb-flush", tmp_path / name)
        assert done.returncode == 2
        assert done.stderr.strip() == (
            f"{tmp_path / name}: expected the folder a log_wandb node writes to (its `dir`), "
            f"found {found}"
        )

"""A command whose output is piped into a reader that stops early (`harness export RUN | head`,
`harness runs list | head`, `harness gate ... | head`) ends as it would have: its own exit code,
no traceback, no `BrokenPipeError` line. Real processes and real pipes, as a shell makes them
(without a shell): `head -1` reading the first line and leaving, or a pipe closed before the
command writes at all."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, newest_run, run_cli, scripted_eval

HARNESS = [sys.executable, "-m", "harness"]
PIPE_BUFFER = 64 * 1024  # Linux's default pipe capacity; Python buffers 8 KiB more


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A run big enough that its export cannot sit in the pipe when the reader leaves, and a
    second run of the same variant, which the gate passes."""
    store = tmp_path_factory.mktemp("pipes") / "results.db"
    scripted_eval(store, "agents/support-baseline.yaml", "--trials", "16")
    big = newest_run(store)
    scripted_eval(store, "agents/support-baseline.yaml", "--trials", "3")
    baseline = newest_run(store)
    scripted_eval(store, "agents/support-baseline.yaml", "--trials", "3", "--fresh")
    same = newest_run(store)
    scripted_eval(store, "agents/support-no-refunds.yaml", "--trials", "3")
    broken = newest_run(store)
    assert run_cli("baseline", "set", baseline, "--store", store).returncode == 0
    return {"store": str(store), "big": big, "same": same, "broken": broken}


def into_head(*args: str) -> tuple[int, str, str]:
    """`harness ARGS | head -1`: the command's exit code and stderr, and what head printed."""
    head_path = shutil.which("head")
    assert head_path, "coreutils' head"
    command = subprocess.Popen(
        [*HARNESS, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert command.stdout is not None and command.stderr is not None
    head = subprocess.Popen([head_path, "-1"], stdin=command.stdout, stdout=subprocess.PIPE)
    command.stdout.close()  # head holds the only reading end: when it leaves, the pipe closes
    first, _ = head.communicate(timeout=120)
    errors = command.stderr.read().decode()
    return command.wait(timeout=120), errors, first.decode()


def into_closed_pipe(*args: str, stderr_too: bool = False) -> tuple[int, str]:
    """`harness ARGS` writing into a pipe whose reader left before it started (and, with
    `stderr_too`, its errors as well: `2>&1 | ...`): its exit code and stderr."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [*HARNESS, *args],
            cwd=ROOT,
            stdout=write,
            stderr=write if stderr_too else subprocess.PIPE,
            text=True,
            timeout=180,
        )
    finally:
        os.close(write)
    return done.returncode, done.stderr or ""


def clean(stderr: str) -> bool:
    return "Traceback" not in stderr and "BrokenPipe" not in stderr and "Broken pipe" not in stderr


def test_an_export_piped_to_head_ends_as_it_would_have(runs: dict[str, str], tmp_path: Path):
    whole = tmp_path / "export.jsonl"
    written = run_cli("export", runs["big"], "--store", runs["store"], "--out", whole)
    assert written.returncode == 0, written.stderr
    text = whole.read_text()
    assert len(text.encode()) > 2 * PIPE_BUFFER  # so the reader is gone before it is written
    code, errors, first = into_head("export", runs["big"], "--store", runs["store"])
    assert (code, errors) == (0, "")
    assert first == text.splitlines(keepends=True)[0]
    code, errors, first = into_head(
        "export", runs["big"], "--store", runs["store"], "--format", "csv"
    )
    assert (code, errors) == (0, "") and first.startswith("run_id,")
    # Bad input piped the same way is still bad input: one line, exit 2.
    code, errors, _ = into_head("export", "no-such-run", "--store", runs["store"])
    assert code == 2 and errors.count("\n") == 1 and clean(errors), errors


def test_commands_printing_tables_or_help_into_a_closed_pipe_exit_0(runs: dict[str, str]):
    for args in (
        ["runs", "list", "--store", runs["store"]],
        ["runs", "show", runs["big"], "--store", runs["store"]],
        ["export", runs["big"], "--store", runs["store"]],
        ["run-eval", "--help"],
    ):
        code, errors = into_closed_pipe(*args)
        assert (code, clean(errors)) == (0, True), (args, code, errors)
        code, errors, _ = into_head(*args)
        assert (code, clean(errors)) == (0, True), (args, code, errors)


def test_a_gate_piped_to_head_exits_with_its_decision(runs: dict[str, str]) -> None:
    def gate(run: str) -> list[str]:
        return [
            "gate",
            "--config",
            "ci/gate.yaml",
            "--candidate",
            runs[run],
            "--store",
            runs["store"],
        ]

    for run, decision in (("same", 0), ("broken", 1)):
        unpiped = subprocess.run([*HARNESS, *gate(run)], cwd=ROOT, capture_output=True, text=True)
        assert unpiped.returncode == decision, unpiped.stdout + unpiped.stderr
        code, errors = into_closed_pipe(*gate(run))
        assert (code, clean(errors)) == (decision, True), (run, code, errors)
        code, errors, first = into_head(*gate(run))
        assert (code, clean(errors)) == (decision, True), (run, code, errors)
        assert first == unpiped.stdout.splitlines(keepends=True)[0]
    # Its errors into the same closed pipe (`2>&1 | head`): bad input is still exit 2.
    code, _ = into_closed_pipe(
        "gate", "--candidate", "nope", "--store", runs["store"], stderr_too=True
    )
    assert code == 2

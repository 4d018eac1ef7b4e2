"""Issue 39: hostile inputs are bad input, never a crash. Invalid UTF-8 in a JSONL export is
replaced and named per line (a warning, not exit 3); a line past `MAX_LINE_BYTES` is skipped
with its file:line and size, without being held in memory; a symlink loop in a check's `file:`,
a task's `state_file:`/`state_db:` or `--state-file` is one line and exit 2; an age past 100
years is exit 2; `harness tau2 import` refuses duplicate and unsafe ids before writing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.production.calls import MAX_LINE_BYTES, Filters, Unreadable, read_jsonl
from harness.specs.located import SpecError
from tests.conftest import ROOT, run_cli
from tests.production.test_trace_tasks import DESK, crash_session

BAD = b"\xff\xfe"  # two bytes that are no UTF-8


def export_with(tmp_path: Path, middle: bytes) -> Path:
    """Two sessions' calls with `middle` as line 3 of the export."""
    lines = [json.dumps(c).encode() for n in (1, 2) for c in crash_session(n)]
    path = tmp_path / "calls.jsonl"
    path.write_bytes(b"\n".join([*lines[:2], middle, *lines[2:]]) + b"\n")
    return path


def with_bad_bytes(call: dict) -> bytes:
    """A call whose user message holds invalid UTF-8 bytes."""
    text = json.dumps(call).encode()
    return text.replace(b"Where is my order", b"Where is my " + BAD + b" order", 1)


def test_invalid_utf8_is_replaced_and_counted_per_line(tmp_path: Path) -> None:
    call = crash_session(3)[0]
    path = export_with(tmp_path, with_bad_bytes(call))
    problems: list[Unreadable] = []
    records = list(read_jsonl(path, Filters(), problems))
    assert [r.id for r in records] == ["c1", "d1", "c3", "c2", "d2"]
    said = records[2].inputs["conversation"][0]["content"]
    assert said == "Where is my \ufffd\ufffd order O-3003?"
    [warning] = problems
    assert str(warning) == f"{path}:3: 2 invalid UTF-8 byte(s) replaced with U+FFFD"
    assert not warning.skipped and warning.label == "warning"


@pytest.mark.parametrize(
    "command",
    [
        ["traces", "to-tasks", "--state-file", DESK, "--domain", "support"],
        ["personas", "from-traces"],
        ["traces", "export"],
    ],
    ids=["to-tasks", "personas", "export"],
)
def test_commands_read_an_export_with_invalid_utf8(tmp_path: Path, command: list[str]) -> None:
    path = export_with(tmp_path, with_bad_bytes(crash_session(3)[0]))
    out = tmp_path / ("out.jsonl" if command[-1] == "export" else "out")
    done = run_cli(*command, "--source", path, "--out", out)
    assert done.returncode in (0, 2), done.stderr  # personas may find too few sessions: exit 2
    assert "Traceback" not in done.stderr and "error:" not in done.stderr
    assert f"warning {path}:3: 2 invalid UTF-8 byte(s) replaced with U+FFFD" in done.stderr
    if command[1] == "to-tasks":
        assert done.returncode == 0
        assert done.stdout.strip().endswith("0 unreadable")  # a warning is not unreadable


def garbled(lines: list[bytes], number: int) -> list[bytes]:
    """`lines` with invalid UTF-8 bytes put into the string values of line `number` (from 1)."""
    lines = list(lines)
    lines[number - 1] = lines[number - 1].replace(b'"content": "', b'"content": "' + BAD, 1)
    return lines


def test_judge_calibrate_reads_invalid_utf8(tmp_path: Path) -> None:
    from tests.production.test_judge_calibrate import JUDGE_RULES, TASK, calibrate, sessions

    (tmp_path / "judge.yaml").write_text(JUDGE_RULES)
    (tmp_path / "task.yaml").write_text(TASK)
    files = {"judge": tmp_path / "judge.yaml", "task": tmp_path / "task.yaml"}
    lines = garbled([json.dumps(c).encode() for c in sessions(set(range(5)))], 4)
    source = tmp_path / "calls.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
    done = calibrate(source, files)
    assert done.returncode == 0, done.stderr
    assert f"warning {source}:4: 2 invalid UTF-8 byte(s) replaced with U+FFFD" in done.stderr
    assert "n=20" in done.stdout  # every labelled session judged, the repaired one too


def test_fidelity_reads_invalid_utf8(tmp_path: Path) -> None:
    import random

    from tests.conftest import newest_run, scripted_eval
    from tests.production.test_behaviour_profiles import gradual, session_calls

    store = tmp_path / "r.db"
    scripted_eval(store, "agents/support-baseline.yaml", "--ids", "address-change")
    rng = random.Random(5)
    calls = [c for n in range(30) for c in session_calls(f"s{n}", gradual(rng, 0.8))]
    source = tmp_path / "calls.jsonl"
    source.write_bytes(b"\n".join(garbled([json.dumps(c).encode() for c in calls], 2)) + b"\n")
    done = run_cli(
        "fidelity", newest_run(store), "--against", source, "--store", store, "--bootstrap", "100"
    )
    assert done.returncode == 0, done.stderr
    assert f"warning {source}:2: 2 invalid UTF-8 byte(s) replaced with U+FFFD" in done.stderr
    assert "30 production session(s)" in done.stdout


def test_a_line_past_the_limit_is_skipped_with_its_size(tmp_path: Path) -> None:
    big = b'{"id": "' + b"x" * (MAX_LINE_BYTES + 10) + b'"}'
    path = export_with(tmp_path, big)
    problems: list[Unreadable] = []
    records = list(read_jsonl(path, Filters(), problems))
    assert [r.id for r in records] == ["c1", "d1", "c2", "d2"]  # the lines after it are read
    [skipped] = problems
    size = len(big) + 1
    assert str(skipped) == (
        f"{path}:3: line of {size:,} bytes skipped: longer than the {MAX_LINE_BYTES:,} bytes "
        "a call may take"
    )
    done = run_cli(
        "traces", "to-tasks", "--source", path, "--out", tmp_path / "out", "--state-file", DESK
    )
    assert done.returncode == 0, done.stderr
    assert f"unreadable {path}:3: line of {size:,} bytes skipped" in done.stderr
    assert done.stdout.strip().endswith("1 unreadable")


def test_a_64_mb_line_costs_far_less_memory_than_itself(tmp_path: Path) -> None:
    """The issue measured 943 MB for a 64 MB line; it is now read in chunks and dropped."""
    path = export_with(tmp_path, b'{"id": "' + b"y" * (64 * 1024 * 1024) + b'"}')
    script = f"""
import resource
from pathlib import Path
from harness.production.calls import Filters, read_jsonl
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
problems = []
ids = [r.id for r in read_jsonl(Path({str(path)!r}), Filters(), problems)]
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(len(ids), len(problems), (after - before) // 1024)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True
    )
    read, problems, grown_mb = map(int, done.stdout.split())
    assert (read, problems) == (4, 1)
    assert grown_mb < 64  # the line is never held whole (16 MB chunks at most)


def loop(folder: Path, name: str) -> None:
    os.symlink(name, folder / name)


TASK = """kind: task
id: {id}
title: a symlink loop
level: 1
domain: support
persona: polite
scenario: {{reason: testing}}
"""


@pytest.mark.parametrize(
    ("name", "body", "line"),
    [
        (
            "loop.py",
            "checks:\n  - kind: python\n    file: loop.py\n",
            "task.yaml:10:5: checks[0].file: cannot read loop.py: a symlink loop",
        ),
        (
            "loop.json",
            "start:\n  state_file: loop.json\nchecks:\n  - {kind: text, contains: hi}\n",
            "task.yaml:9:3: start.state_file: cannot read loop.json: a symlink loop",
        ),
        (
            "loop.sqlite",
            "start:\n  state_db: loop.sqlite\nchecks:\n  - {kind: text, contains: hi}\n",
            "task.yaml:9:3: start.state_db: cannot read loop.sqlite: a symlink loop",
        ),
    ],
    ids=["check-file", "state_file", "state_db"],
)
def test_a_symlink_loop_in_a_task_is_one_line_and_exit_2(
    tmp_path: Path, name: str, body: str, line: str
) -> None:
    loop(tmp_path, name)
    (tmp_path / "task.yaml").write_text(TASK.format(id="loop") + body)
    done = run_cli("validate", "task.yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert line in done.stderr.splitlines()
    assert "Traceback" not in done.stderr and "RuntimeError" not in done.stderr
    store = tmp_path / "r.db"
    played = run_cli(
        "run-eval",
        "--tasks",
        "task.yaml",
        "--agent",
        ROOT / "agents/support-baseline.yaml",
        "--store",
        store,
        cwd=tmp_path,
    )
    assert played.returncode == 2
    assert line in played.stderr.splitlines()


def test_a_symlink_loop_as_state_file_option_is_exit_2(tmp_path: Path) -> None:
    path = export_with(tmp_path, json.dumps(crash_session(3)[0]).encode())
    loop(tmp_path, "loop.json")
    out = tmp_path / "out"
    done = run_cli(
        "traces", "to-tasks", "--source", path, "--out", out, "--state-file", tmp_path / "loop.json"
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"harness: --state-file {tmp_path / 'loop.json'}: cannot read "
        f"{tmp_path / 'loop.json'}: a symlink loop"
    ]
    assert not out.exists()


@pytest.mark.parametrize("age", ["10000000d", "36526d", "99999999999999999999999999w", "5300w"])
def test_an_age_past_100_years_is_exit_2(tmp_path: Path, age: str) -> None:
    path = export_with(tmp_path, json.dumps(crash_session(3)[0]).encode())
    for command in (["traces", "to-tasks"], ["personas", "from-traces"]):
        done = run_cli(*command, "--source", path, "--since", age, "--out", tmp_path / "out")
        assert done.returncode == 2
        assert done.stderr.splitlines() == [
            f"--since {age}: expected an age of at most 100 years (36525d), got {age}"
        ]
    assert not (tmp_path / "out").exists()


def test_an_age_of_100_years_is_read(tmp_path: Path) -> None:
    path = export_with(tmp_path, json.dumps(crash_session(3)[0]).encode())
    done = run_cli(
        "traces",
        "to-tasks",
        "--source",
        path,
        "--since",
        "36525d",
        "--out",
        tmp_path / "out",
        "--state-file",
        DESK,
    )
    assert done.returncode == 0, done.stderr


def test_personas_seed_below_zero_is_exit_2(tmp_path: Path) -> None:
    done = run_cli("personas", "from-traces", "--seed", "-1", "--out", tmp_path / "out")
    assert done.returncode == 2
    assert done.stderr.splitlines() == ["harness: --seed: expected 0 or more, got -1"]


# `harness tau2 import`: ids checked before anything is written.


@pytest.fixture(scope="module")
def tau2_app():
    pytest.importorskip("tau2")
    plugin = ROOT / "integrations" / "harness-tau2" / "src"
    sys.path.insert(0, str(plugin))
    try:
        from harness_tau2 import cli, export
    finally:
        sys.path.remove(str(plugin))
    return cli.app, export


def fake_tasks(ids: list[str]) -> list:
    from harness_tau2.convert import tau2_tasks

    real = tau2_tasks("airline", "base")[0]
    return [real.model_copy(update={"id": task_id}) for task_id in ids]


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        (
            ["1", "2", "1"],
            "tau2 airline tasks '1' and '1' have the same id 'tau2-airline-1'; nothing written",
        ),
        (
            ["a_b", "a b"],
            "tau2 airline tasks 'a_b' and 'a b' have the same id 'tau2-airline-a-b'; "
            "nothing written",
        ),
        (
            ["1", "x/../../etc"],
            "tau2 airline task 'x/../../etc': its id 'tau2-airline-x/../../etc' has a path "
            "separator; nothing written",
        ),
        (
            ["1", "bad\nid"],
            "tau2 airline task 'bad\\nid': its id 'tau2-airline-bad\\nid' has a control "
            "character; nothing written",
        ),
    ],
    ids=["duplicate", "duplicate-after-normalising", "path", "control"],
)
def test_tau2_import_refuses_bad_ids_before_writing(
    tau2_app, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ids: list[str], message: str
) -> None:
    from typer.testing import CliRunner

    app, export = tau2_app
    monkeypatch.setattr(export, "tau2_tasks", lambda domain, split: fake_tasks(ids))
    out = tmp_path / "tasks"
    done = CliRunner().invoke(app, ["--domain", "airline", "--out", str(out)])
    assert done.exit_code == 2
    assert done.stderr.splitlines() == [f"harness tau2 import: {message}"]
    assert not out.exists()  # nothing written, not even the persona or db.json
    assert not (tmp_path / "etc").exists()


def test_tau2_unsafe_ids(tau2_app) -> None:
    _, export = tau2_app
    assert export.unsafe_id("tau2-airline-1") is None
    for bad in ("", " ", "..", ".hidden", "a/b", "a\\b", "a\x00b", "a\u202eb", "x" * 300):
        assert export.unsafe_id(bad) is not None, bad


def test_a_task_path_that_is_a_symlink_loop_is_exit_2(tmp_path: Path) -> None:
    import harness

    loop(tmp_path, "l.yaml")
    line = f"{tmp_path / 'l.yaml'}: cannot read file: Too many levels of symbolic links"
    agent = ROOT / "agents/support-baseline.yaml"
    for args in (
        ["tasks", "list", tmp_path / "l.yaml"],
        ["run-eval", "--tasks", tmp_path / "l.yaml", "--agent", agent],
        ["run-eval", "--tasks", ROOT / "tasks/support", "--agent", tmp_path / "l.yaml"],
    ):
        done = (
            run_cli(*args, "--store", tmp_path / "r.db")
            if args[0] == "run-eval"
            else run_cli(*args)
        )
        assert done.returncode == 2
        assert done.stderr.splitlines() == [line]
    assert not (tmp_path / "r.db").exists()
    with pytest.raises(SpecError, match="symbolic links"):
        harness.load_suite(tmp_path / "l.yaml")

"""Hostile or mistaken input is one line and exit 2, never a hang, a crash (exit 3) or gigabytes:
count maxima, in-flight work bounded by the episodes, spec files that must be regular files,
deep nesting refused at once, line breaks in names escaped, a bad `HARNESS_SANDBOX` (issue 27)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest

from harness.engine import executors
from tests.conftest import JUDGE

BASELINE = "agents/support-baseline.yaml"


def errors(result: Any) -> list[str]:
    """The error lines of a `validate` (its closing count taken out)."""
    return [line for line in result.stderr.splitlines() if not line.endswith(" invalid")]


def test_a_fifo_as_a_task_file_is_refused_not_read(cli, tmp_path: Path) -> None:
    fifo = tmp_path / "task.yaml"
    os.mkfifo(fifo)
    result = cli("validate", fifo)  # reading it would block forever
    assert result.exit_code == 2
    assert errors(result) == [f"{fifo}: expected a regular YAML file, found a FIFO"]


def test_a_file_nested_20000_deep_is_refused_in_under_two_seconds(cli, tmp_path: Path) -> None:
    deep = tmp_path / "deep.yaml"
    deep.write_text("kind: task\nid: deep\nstart: " + "[" * 20_000 + "]" * 20_000 + "\n")
    started = time.monotonic()
    result = cli("validate", deep)
    assert time.monotonic() - started < 2
    assert result.exit_code == 2
    assert errors(result) == [f"{deep}:3:208: nested deeper than 200 levels"]


def test_a_symlink_loop_is_one_line(cli, tmp_path: Path) -> None:
    (tmp_path / "a.yaml").symlink_to(tmp_path / "b.yaml")
    (tmp_path / "b.yaml").symlink_to(tmp_path / "a.yaml")
    result = cli("validate", tmp_path / "a.yaml")
    assert result.exit_code == 2
    assert errors(result) == [
        f"{tmp_path / 'a.yaml'}: cannot read file: Too many levels of symbolic links"
    ]


def test_report_out_a_folder_is_bad_input(cli, tmp_path: Path) -> None:
    result = cli("report", "some-run", "--out", tmp_path, "--store", tmp_path / "r.db")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"harness report: --out {tmp_path}: a folder; expected an HTML file path"
    ]


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--concurrency", "10001", "harness: --concurrency: expected 1 to 10,000, got 10001"),
        ("--concurrency", "0", "harness: --concurrency: expected 1 to 10,000, got 0"),
        ("--trials", str(2**64), f"harness: --trials: expected 1 to 10,000, got {2**64}"),
    ],
)
def test_counts_have_maxima(cli, option: str, value: str, message: str) -> None:
    for command in ("run-eval", "compare"):
        result = cli(command, "--tasks", "tasks/support", option, value)
        assert result.exit_code == 2, result.output
        assert result.stderr.splitlines() == [message]


def test_a_dag_node_count_has_its_maximum(cli, tmp_path: Path) -> None:
    dag = tmp_path / "dag.yaml"
    dag.write_text(
        "kind: dag\nname: big\nnodes:\n  tasks:\n    uses: load_tasks\n"
        "    with: {paths: [tasks/support]}\n"
        f"  play:\n    uses: simulate\n    needs: [tasks]\n    with: {{agent: {BASELINE}, "
        f"trials: {2**64}, concurrency: 10000000}}\n"
    )
    result = cli("validate", dag)
    assert result.exit_code == 2
    lines = errors(result)
    assert any("trials: Input should be less than or equal to 10000" in line for line in lines)
    assert any("concurrency: Input should be less than or equal to 10000" in line for line in lines)


def test_slots_in_flight_are_at_most_the_episodes(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--concurrency 10000000` on one episode is one slot, not ten million waiting tasks."""
    slots: list[int] = []

    async def one_slot(jobs: executors.Jobs, play: Any) -> None:
        slots.append(1)

    monkeypatch.setattr(executors, "drain", one_slot)
    monkeypatch.setattr(executors, "make_agent", lambda variant, runtime: None)
    jobs = executors.Jobs([Any, Any], lambda job: False, lambda *done: None)  # type: ignore[list-item]
    setup = executors.EpisodeSetup(None, "", None, 10_000_000)  # type: ignore[arg-type]
    asyncio.run(executors.LocalExecutor().play(jobs, setup))
    assert len(slots) == 2


def test_a_deep_set_value_is_one_line(cli, tmp_path: Path) -> None:
    deep = "agent.model=" + "[" * 5000 + "]" * 5000
    result = cli(
        "run-eval", "--tasks", "tasks/support", "--agent", BASELINE, "--set", deep,
        "--store", tmp_path / "r.db", "--judge-model", JUDGE,
    )  # fmt: skip
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line == f"--set {deep}: nested deeper than 200 levels"


def test_a_newline_in_a_file_or_store_name_stays_one_line(cli, tmp_path: Path) -> None:
    task = tmp_path / "new\nline.yaml"
    task.write_text("kind: task\nid: [oops\n")
    result = cli("validate", task)
    assert result.exit_code == 2
    [line] = errors(result)
    assert line.startswith(str(tmp_path) + "/new\\nline.yaml:")

    store = tmp_path / "no\nstore.db"
    result = cli("runs", "list", "--store", store)
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1
    assert "no\\nstore.db" in result.stderr


def test_a_bogus_sandbox_is_refused_at_start(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    for refused in ("bogus", "subprocess"):  # `subprocess`: the backend's name, not a value
        monkeypatch.setenv("HARNESS_SANDBOX", refused)
        result = cli("validate", "tasks/support")
        assert result.exit_code == 2
        assert result.stderr.splitlines() == [
            f"harness: HARNESS_SANDBOX={refused!r}: expected one of docker, bwrap, none"
        ]
    monkeypatch.setenv("HARNESS_SANDBOX", "none")
    assert cli("validate", "tasks/support").exit_code == 0

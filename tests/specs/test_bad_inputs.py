"""Every file of the bad-input corpus gives exactly its expected one-line errors and exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT, run_harness

CORPUS = sorted((ROOT / "tests" / "bad_inputs").glob("*.yaml"))
CORPUS_DIR = "tests/bad_inputs"


def expected_lines(path: Path) -> list[str]:
    relative = f"{CORPUS_DIR}/{path.name}"
    return [
        line.removeprefix("# expect: ").replace("{file}", relative).replace("{dir}", CORPUS_DIR)
        for line in path.read_bytes().decode(errors="replace").splitlines()  # one is not UTF-8
        if line.startswith("# expect: ")
    ]


def test_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 15
    assert all(expected_lines(path) for path in CORPUS), "every bad input states its errors"


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_bad_file_gives_its_error(cli, path: Path) -> None:
    result = cli("validate", f"{CORPUS_DIR}/{path.name}")
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if not line.endswith(" invalid")]
    assert errors == expected_lines(path)
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_whole_corpus_in_a_real_process_has_no_traceback() -> None:
    done = run_harness("validate", CORPUS_DIR)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr + done.stdout
    for path in CORPUS:
        for line in expected_lines(path):
            assert line in done.stderr.splitlines()
    assert done.stderr.splitlines()[-1] == f"0 valid, {len(CORPUS)} invalid"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "agent.parameters.temperature=hot",
            "--set agent.parameters.temperature=hot: parameters.temperature: Input should be a valid "
            "number, unable to parse string as a number, found 'hot'",
        ),
        (
            "agent.paramters.temperature=0.3",
            "--set agent.paramters.temperature=0.3: paramters: unknown field 'paramters'; "
            "did you mean 'parameters'?",
        ),
        (
            "agent.name.first=x",
            "--set agent.name.first=x: name.first: cannot set a field inside a str",
        ),
        (
            "agent.tools.42=get_order",
            "--set agent.tools.42=get_order: tools[42]: no such list item",
        ),
        (
            "task.end.max_turns=0",
            "--set task.end.max_turns=0: end.max_turns: Input should be greater than or equal to 1, "
            "found 0",
        ),
        (
            "max_turns=3",
            "--set max_turns=3: expected NODE.PARAM=VALUE or agent./task./persona.FIELD=VALUE; nodes: tasks, simulate, grade, report, wandb",
        ),
        ("agent.model", "--set agent.model: expected KEY.PATH=VALUE"),
        (
            "agent.tools=[get_order, launch_rocket]",
            "--set agent.tools=[get_order, launch_rocket]: tools[1]: unknown tool 'launch_rocket' in "
            "domain "
            "'support'; known: cancel_order, find_customer, get_order, issue_refund, list_orders, "
            "transfer_to_human, update_address",
        ),
    ],
)
def test_bad_override_gives_one_line_and_keeps_the_store(
    cli, tmp_path: Path, override: str, message: str
) -> None:
    store = tmp_path / "results.db"
    result = cli(
        "run-eval",
        "--tasks",
        "tasks/support",
        "--agent",
        "agents/support-baseline.yaml",
        "--store",
        store,
        "--set",
        override,
    )
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [message]
    assert not store.exists(), "bad input must not create or touch the results store"

"""`harness traces list` and `traces show` on an app's sessions (`tests/helpdesk_app.py`: a root
op per session, turn ops below it, feedback on the turn calls, one thread per session): the
feedback of a whole session is counted, and a session is shown as a conversation with its
feedback and its failures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.testing.fake_server import FakeServer
from tests.conftest import ROOT, run_cli
from tests.helpdesk_app import FEEDBACK, SESSIONS, production_model

APP = ROOT / "tests/helpdesk_app.py"
WIDE = "250"  # columns, so that table rows and reasons are not wrapped


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The helpdesk's production sessions recorded with `record_locally`."""
    path = tmp_path_factory.mktemp("helpdesk") / "traces.db"
    with FakeServer(responder=production_model).running() as model:
        served = subprocess.run(
            [sys.executable, str(APP), str(path), model.url],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert served.returncode == 0, served.stderr
    return path


def listed_roots(store: Path) -> dict[str, list[str]]:
    """`traces list`'s rows of app sessions by thread: id, op, thread, started, status,
    feedback."""
    listed = run_cli("traces", "list", "--store", store, COLUMNS=WIDE)
    assert listed.returncode == 0, listed.stderr
    rows = [
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in listed.stdout.splitlines()
        if "chat_session" in line
    ]
    return {row[2]: row for row in rows}


def test_list_counts_the_feedback_of_nested_calls(store: Path) -> None:
    roots = listed_roots(store)
    assert set(roots) == set(SESSIONS)
    counts = {thread: int(row[5]) for thread, row in roots.items()}
    expected = dict.fromkeys(SESSIONS, 0)
    for thread, (_, note) in FEEDBACK.items():
        expected[thread] = 2 if note else 1  # a 👎, and a note when there is one
    assert counts == expected


def test_show_prints_a_session_with_its_feedback_and_failures(store: Path) -> None:
    root_id = listed_roots(store)["pw-bwong"][0]
    shown = run_cli("traces", "show", root_id, "--store", store, COLUMNS=WIDE)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    first, second = SESSIONS["pw-bwong"]
    assert f"user: {first}" in out and f"user: {second}" in out
    assert out.index(first) < out.index(second)
    assert "assistant: Done! A temporary password was sent to b.wong@corp.example." in out
    assert "assistant: Please try again in a few minutes." in out
    assert '-> lookup_user({"username": "bwong"})' in out
    assert '-> reset_password({"username": "bwong"})' in out
    assert '<- reset_password {"error": "account bwong is locked"}' in out
    assert "reaction 👎  (on handle_turn " in out
    assert f"note: {FEEDBACK['pw-bwong'][1]}  (on handle_turn " in out
    assert "claimed success after a tool error: reset_password answered 'account bwong is" in out
    assert "(at reset_password " in out
    assert "jdoe" not in out and "asmith" not in out, "only this session"


def test_show_by_thread_id_is_the_same_session(store: Path) -> None:
    root_id = listed_roots(store)["pw-bwong"][0]
    by_root = run_cli("traces", "show", root_id, "--store", store, COLUMNS=WIDE)
    by_thread = run_cli("traces", "show", "pw-bwong", "--store", store, COLUMNS=WIDE)
    assert by_thread.returncode == 0, by_thread.stderr
    assert by_thread.stdout == by_root.stdout
    assert by_thread.stdout.startswith("thread pw-bwong")


def test_show_a_session_that_crashed_says_where(store: Path) -> None:
    shown = run_cli("traces", "show", "printer-1", "--store", store, COLUMNS=WIDE)
    assert shown.returncode == 0, shown.stderr
    assert f"user: {SESSIONS['printer-1'][0]}" in shown.stdout
    assert "feedback: none" in shown.stdout
    assert "exception TypeError: unsupported operand" in shown.stdout
    assert "(at triage " in shown.stdout


def test_show_an_unknown_id_is_one_line_and_exit_2(store: Path) -> None:
    for unknown in ("no-such-session", "zzzzzzzz"):
        shown = run_cli("traces", "show", unknown, "--store", store)
        assert shown.returncode == 2
        assert shown.stderr.strip().count("\n") == 0, shown.stderr
        assert f"no single finished episode or app session with id {unknown!r}" in shown.stderr
        assert "Traceback" not in shown.stderr and not shown.stdout

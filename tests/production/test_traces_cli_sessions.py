"""`harness traces list` and `traces show` on an app's sessions (`tests/apps/helpdesk_app.py`: a root
op per session, turn ops below it, feedback on the turn calls, one thread per session; and
`tests/apps/support_app.py`: a root op per turn, a thread per session): a session is one row with its
user turns, the feedback of a whole session is counted, and a session is shown as a
conversation with its feedback and its failures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.testing.fake_server import FakeServer
from tests.apps import support_app
from tests.apps.helpdesk_app import FEEDBACK, SESSIONS, production_model
from tests.conftest import ROOT, run_cli

APP = ROOT / "tests/apps/helpdesk_app.py"
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


@pytest.fixture(scope="module")
def turn_roots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The support bot's production sessions: a root call per turn, a thread per session."""
    path = tmp_path_factory.mktemp("support") / "traces.db"
    with FakeServer(responder=support_app.production_model).running() as model:
        served = subprocess.run(
            [sys.executable, str(ROOT / "tests/apps/support_app.py"), str(path), model.url],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert served.returncode == 0, served.stderr
    return path


def listed_rows(store: Path, *options: str) -> list[list[str]]:
    """`traces list`'s rows of app sessions: id, op, thread, started, turns, status,
    feedback."""
    listed = run_cli("traces", "list", "--trace-store", store, *options, COLUMNS=WIDE)
    assert listed.returncode == 0, listed.stderr
    table = listed.stdout.split("Sessions recorded by apps", 1)[1]
    return [
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in table.splitlines()
        if line.startswith("│")
    ]


def listed_roots(store: Path) -> dict[str, list[str]]:
    """`traces list`'s rows of app sessions by thread."""
    return {row[2]: row for row in listed_rows(store)}


def test_list_counts_the_feedback_of_nested_calls(store: Path) -> None:
    roots = listed_roots(store)
    assert set(roots) == set(SESSIONS)
    counts = {thread: int(row[6]) for thread, row in roots.items()}
    expected = dict.fromkeys(SESSIONS, 0)
    for thread, (_, note) in FEEDBACK.items():
        expected[thread] = 2 if note else 1  # a 👎, and a note when there is one
    assert counts == expected


def test_list_shows_a_session_once_with_its_user_turns(store: Path, turn_roots: Path) -> None:
    # A root op per session, turns below it: one row a session, as many turns as it had.
    rows = listed_rows(store)
    assert len(rows) == len(SESSIONS)
    assert {row[2]: int(row[4]) for row in rows} == {t: len(s) for t, s in SESSIONS.items()}
    # A root op per turn (the shape that listed a row per turn): still one row a session.
    rows = listed_rows(turn_roots)
    assert [row[2] for row in rows].count("s-track") == 1, rows
    assert len(rows) == len(support_app.SESSIONS)
    turns = {row[2]: int(row[4]) for row in rows}
    assert turns == {t: len(texts) for t, texts in support_app.SESSIONS.items()}
    assert turns["s-track"] == 2
    statuses = {row[2]: row[5] for row in rows}
    assert statuses["s-unshipped"] == "error" and statuses["s-track"] == "success"
    assert {row[2]: int(row[6]) for row in rows}["s-mug"] == 2  # the 👎 and the note
    # --limit counts sessions, newest first, not root calls.
    newest = listed_rows(turn_roots, "--limit", "2")
    assert [row[2] for row in newest] == [row[2] for row in rows[:2]]
    # The id shown opens the whole session.
    shown = run_cli("traces", "show", turns_id(rows, "s-track"), "--trace-store", turn_roots)
    assert shown.returncode == 0, shown.stderr
    first, second = support_app.SESSIONS["s-track"]
    assert f"user: {first}" in shown.stdout and f"user: {second}" in shown.stdout


def turns_id(rows: list[list[str]], thread: str) -> str:
    return next(row[0] for row in rows if row[2] == thread)


def test_show_prints_a_session_with_its_feedback_and_failures(store: Path) -> None:
    root_id = listed_roots(store)["pw-bwong"][0]
    shown = run_cli("traces", "show", root_id, "--trace-store", store, COLUMNS=WIDE)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    first, second = SESSIONS["pw-bwong"]
    assert f"user: {first}" in out and f"user: {second}" in out
    assert out.index(first) < out.index(second)
    # the email is masked: `traces show` prints production's text without personal data
    assert "assistant: Done! A temporary password was sent to [PII:email]." in out
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
    by_root = run_cli("traces", "show", root_id, "--trace-store", store, COLUMNS=WIDE)
    by_thread = run_cli("traces", "show", "pw-bwong", "--trace-store", store, COLUMNS=WIDE)
    assert by_thread.returncode == 0, by_thread.stderr
    assert by_thread.stdout == by_root.stdout
    assert by_thread.stdout.startswith("thread pw-bwong")


def test_show_a_session_that_crashed_says_where(store: Path) -> None:
    shown = run_cli("traces", "show", "printer-1", "--trace-store", store, COLUMNS=WIDE)
    assert shown.returncode == 0, shown.stderr
    assert f"user: {SESSIONS['printer-1'][0]}" in shown.stdout
    assert "feedback: none" in shown.stdout
    assert "exception TypeError: unsupported operand" in shown.stdout
    assert "(at triage " in shown.stdout


def test_show_an_unknown_id_is_one_line_and_exit_2(store: Path) -> None:
    for unknown in ("no-such-session", "zzzzzzzz"):
        shown = run_cli("traces", "show", unknown, "--trace-store", store)
        assert shown.returncode == 2
        assert shown.stderr.strip().count("\n") == 0, shown.stderr
        assert f"no single finished episode or app session with id {unknown!r}" in shown.stderr
        assert "Traceback" not in shown.stderr and not shown.stdout

"""Progress off a terminal: plain lines with the rate and the time left, so a long run in CI or
a log never looks hung, and none for a run too short to need them."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from harness.engine import progress
from harness.engine.progress import Board, Tracker


def test_a_long_node_prints_a_line_per_tenth_with_rate_and_time_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(progress, "QUIET_FOR_S", 0.0)
    out = io.StringIO()
    tracker = Tracker(None, "production", 20, out)
    for i in range(20):
        tracker.advance(passed=i % 2 == 0)
    lines = out.getvalue().splitlines()
    assert len(lines) == 10
    assert lines[0].startswith("production: 2/20 (") and "left) pass 50% errors 0" in lines[0]
    assert lines[-1].startswith("production: 20/20 (") and "left" not in lines[-1]


def test_a_short_node_prints_nothing_and_a_terminal_gets_the_live_board() -> None:
    out = io.StringIO()
    tracker = Tracker(None, "production", 5, out)
    for _ in range(5):
        tracker.advance()
    assert out.getvalue() == ""
    piped = Board(Console(file=io.StringIO(), force_terminal=False))
    assert piped.progress is None and piped.lines is not None
    live = Board(Console(file=io.StringIO(), force_terminal=True))
    assert live.progress is not None and live.lines is None
    assert Board(enabled=False).lines is None

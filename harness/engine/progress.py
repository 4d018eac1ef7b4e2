"""A progress display per running node: episodes done out of total, pass rate so far, errors,
tokens and cost. On a terminal a live board; off one (CI, a pipe, a log file) a plain line on
stderr every tenth of a node's work or every 30 seconds once it has run 10 seconds, with the
rate and an estimate of the time left, so a long run never looks hung."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.transcript import Usage

LINE_EVERY_S = 30.0
QUIET_FOR_S = 10.0  # a node that finishes sooner prints no line: a short run stays short


class Tracker:
    """One node's line on the board (or its plain lines, given `lines`)."""

    def __init__(
        self, progress: Progress | None, label: str, total: int, lines: TextIO | None = None
    ):
        self.progress = progress
        self.label, self.total, self.lines = label, total, lines
        self.passed = self.graded = self.errors = self.completed = 0
        self.usage = Usage()
        self.task = progress.add_task(label, total=total, stats="") if progress else None
        self.started = self.printed = time.monotonic()

    def advance(
        self, passed: bool | None = None, error: bool = False, usage: Usage | None = None
    ) -> None:
        """One more unit done; `passed` when it was graded, `error` when it failed."""
        self.completed += 1
        if passed is not None:
            self.graded += 1
            self.passed += passed
        self.errors += error
        if usage is not None:
            self.usage.add(usage)
        if self.lines is not None:
            self._line()
        if self.progress is None or self.task is None:
            return
        self.progress.update(self.task, advance=1, stats=self._stats())

    def _stats(self) -> str:
        rate = f"pass {self.passed / self.graded:.0%} " if self.graded else ""
        tokens = self.usage.input_tokens + self.usage.output_tokens
        return f"{rate}errors {self.errors}  {tokens:,} tok  ${self.usage.cost_usd:.4f}"

    def _line(self) -> None:
        """A plain line at every tenth of the work, every 30 s, and at the end, once the node
        has run for 10 s."""
        now = time.monotonic()
        if now - self.started < QUIET_FOR_S:
            return
        step = max(self.total // 10, 1)
        done = self.completed >= self.total
        if not (done or self.completed % step == 0 or now - self.printed >= LINE_EVERY_S):
            return
        self.printed = now
        elapsed = max(now - self.started, 1e-9)
        speed = self.completed / elapsed
        left = (self.total - self.completed) / speed if speed and not done else 0.0
        eta = f", about {left:.0f}s left" if not done else f", {elapsed:.0f}s"
        assert self.lines is not None
        print(
            f"{self.label}: {self.completed}/{self.total} ({speed:.1f}/s{eta}) {self._stats()}",
            file=self.lines,
            flush=True,
        )


class Board:
    """The progress display of a pipeline execution."""

    def __init__(self, console: Console | None = None, enabled: bool | None = None):
        """`enabled`: None shows a live board on a terminal and plain lines elsewhere; True
        a live board; False nothing."""
        console = console or Console(stderr=True)
        live = console.is_terminal if enabled is None else enabled
        self.progress = (
            Progress(
                TextColumn("{task.description:<14}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[stats]}"),
                TimeElapsedColumn(),
                console=console,
            )
            if live
            else None
        )
        self.lines = sys.stderr if enabled is None and not live else None

    def track(self, label: str, total: int) -> Tracker:
        return Tracker(self.progress, label, total, self.lines)

    def __enter__(self) -> Board:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self.progress is not None:
            self.progress.stop()


QUIET = Board(enabled=False)

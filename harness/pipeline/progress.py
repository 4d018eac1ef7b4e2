"""A progress display per running node: episodes done out of total, pass rate so far, errors,
tokens and cost. Silent when the output is not a terminal."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.transcript import Usage


class Tracker:
    """One node's line on the board."""

    def __init__(self, progress: Progress | None, label: str, total: int):
        self.progress = progress
        self.passed = self.graded = self.errors = self.completed = 0
        self.usage = Usage()
        self.task = progress.add_task(label, total=total, stats="") if progress else None

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
        if self.progress is None or self.task is None:
            return
        rate = f"pass {self.passed / self.graded:.0%} " if self.graded else ""
        tokens = self.usage.input_tokens + self.usage.output_tokens
        stats = f"{rate}errors {self.errors}  {tokens:,} tok  ${self.usage.cost_usd:.4f}"
        self.progress.update(self.task, advance=1, stats=stats)


class Board:
    """The progress display of a pipeline execution."""

    def __init__(self, console: Console | None = None, enabled: bool | None = None):
        console = console or Console(stderr=True)
        self.progress = (
            Progress(
                TextColumn("{task.description:<14}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[stats]}"),
                TimeElapsedColumn(),
                console=console,
            )
            if (console.is_terminal if enabled is None else enabled)
            else None
        )

    def track(self, label: str, total: int) -> Tracker:
        return Tracker(self.progress, label, total)

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

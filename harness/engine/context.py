"""What playing and grading runs use, opened once by whoever starts the work (a command, a
pipeline, `harness.evaluate`) and passed down: the store, the model runtime, the tracer, the
progress board, and the settings that are not part of any run's content."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.engine.progress import QUIET, Board
from harness.tracing import NO_TRACER, Tracer

if TYPE_CHECKING:
    from harness.models import ModelRuntime
    from harness.store import Store


@dataclass
class Engine:
    """The open resources of one piece of work."""

    store: Store
    runtime: ModelRuntime
    tracer: Tracer = NO_TRACER
    board: Board = QUIET
    pipeline_id: str = ""  # the pipeline the runs belong to, if any
    executor: str | None = None  # where episodes are played: `local` (default) or `ray`
    workers: int | None = None  # Ray workers (default: one per CPU of the cluster)
    # Checker code may run without OS isolation where there is none (`--unsafe-checkers`).
    unsafe_checkers: bool = False

"""The engine under the library API: where episodes are played (this process or Ray workers),
how a run is played into the store and graded there, and the progress board. The API
(`harness.api`), the pipeline's nodes, the climb and the commands call it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.engine.executors import Executor


def make_executor(name: str, workers: int | None = None) -> Executor:
    """The executor a name stands for (`workers`: Ray workers, default one per CPU). Here, not
    in `executors`, so that the module Ray's executor builds on does not import it back; both
    are imported on first use, so that importing the engine's package stays light."""
    if name == "ray":
        from harness.engine.ray_executor import RayExecutor

        return RayExecutor(workers)
    from harness.engine.executors import LocalExecutor

    return LocalExecutor()

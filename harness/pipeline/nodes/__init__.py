"""The registry of node kinds. Each kind is one module here that registers a `NodeKind`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.pipeline.types import NodeOutput
from harness.registry import Registry
from harness.specs.base import Spec
from harness.specs.digest import canonical, file_digest, source_digest

if TYPE_CHECKING:
    from harness.engine.context import Engine
    from harness.engine.progress import Board
    from harness.models import ModelRuntime
    from harness.store import Store
    from harness.tracing import Tracer

__all__ = [
    "NODE_KINDS",
    "NodeContext",
    "NodeKind",
    "canonical",
    "file_digest",
    "register",
    "source_digest",
]

BUILTIN = (
    "load_tasks",
    "seed_env",
    "simulate",
    "grade",
    "compare",
    "gate",
    "fidelity",
    "report",
    "log_wandb",
)


async def _no_inputs() -> list[NodeOutput]:
    return []


@dataclass
class NodeContext:
    """What a running node may use."""

    store: Store
    runtime: ModelRuntime
    tracer: Tracer
    board: Board
    pipeline_id: str
    node_id: str
    key: str = ""  # the node's cache key: what identifies its work
    fresh: bool = False  # start over instead of resuming an unfinished run of this key
    config: dict[str, Any] = field(default_factory=dict)  # the pipeline's resolved configuration
    executor: str | None = None  # where `simulate` plays episodes (`local`, `ray`), if told
    workers: int | None = None  # Ray workers (default: one per CPU of the cluster)
    # Checker code may run without OS isolation where there is none (`--unsafe-checkers`).
    unsafe_checkers: bool = False
    resolved: Any = None  # what the node kind's `check` resolved when the pipeline was planned
    # Tell the nodes that follow this one what they may start from before it finishes (its
    # output so far: `simulate` announces its run once it is claimed). Once; later calls are
    # ignored, as are an `always_run` node's; a node that does not announce is followed from
    # its final output.
    announce: Callable[[NodeOutput], None] = lambda output: None
    # The final outputs of the node's needs. A follower (`NodeKind.follows`) is given what its
    # needs announced and awaits this for what they finally gave; for any other node, they are
    # its inputs already.
    inputs_done: Callable[[], Awaitable[list[NodeOutput]]] = field(default=_no_inputs)

    @property
    def engine(self) -> Engine:
        """The resources and settings the engine's operations take."""
        from harness.engine.context import Engine

        return Engine(
            self.store,
            self.runtime,
            self.tracer,
            self.board,
            self.pipeline_id,
            self.executor,
            self.workers,
            self.unsafe_checkers,
        )


Run = Callable[[Any, list[Any], NodeContext], Awaitable[NodeOutput]]


@dataclass(frozen=True)
class NodeKind:
    """A kind of node: its parameters, what it takes from its `needs`, what it gives, and how
    it runs. `inputs` lists the accepted output types per need, in order; with `variadic`, the
    last entry accepts any number of needs (at least one)."""

    name: str
    params: type[Spec]
    inputs: tuple[tuple[type[NodeOutput], ...], ...]
    output: type[NodeOutput]
    run: Run
    variadic: bool = False
    optional: int = 0  # how many trailing inputs may be left out
    # The content that identifies the work beyond params and inputs (e.g. a file's hash).
    identity: Callable[[Any, NodeContext], dict[str, Any]] | None = None
    # Rebuild a cached output (e.g. reattach in-memory data from the inputs).
    restore: Callable[[Any, list[Any]], NodeOutput] | None = None  # takes the `output` type
    always_run: bool = False  # cheap nodes whose key depends on their own output
    # Parameters that name files or folders, which must exist before anything runs.
    files: tuple[str, ...] = ()
    # Check the parameters' references (files, variants) before anything runs; raise SpecError.
    # Checks the parameters' files when the pipeline is planned, and gives what it resolved
    # (e.g. the loaded agent variant), which the node's identity and run then take as
    # `ctx.resolved` instead of loading it again.
    check: Callable[[Any], Any] | None = None
    # Start as soon as the needs have announced their outputs (`NodeContext.announce`) rather
    # than when they finish, and work on what they have stored so far (`grade` grades episodes
    # while they are played). The node finishes after its needs; if one fails, it is skipped.
    follows: bool = False

    def accepts(self, count: int) -> bool:
        if self.variadic:
            return count >= len(self.inputs)
        return len(self.inputs) - self.optional <= count <= len(self.inputs)

    def input_types(self, position: int) -> tuple[type[NodeOutput], ...]:
        return self.inputs[min(position, len(self.inputs) - 1)]


NODE_KINDS: Registry[NodeKind] = Registry(
    "node kind",
    tuple(f"harness.pipeline.nodes.{name}" for name in BUILTIN),
    group="harness.nodes",
)


def register(kind: NodeKind) -> NodeKind:
    """Make a node kind available to `uses:`."""
    return NODE_KINDS.register(kind.name)(kind)

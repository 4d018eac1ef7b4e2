"""The registry of node kinds. Each kind is one module here that registers a `NodeKind`."""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.pipeline.types import NodeOutput
from harness.registry import Registry
from harness.specs.base import Spec

if TYPE_CHECKING:
    from harness.models import ModelRuntime
    from harness.pipeline.progress import Board
    from harness.store import Store
    from harness.tracing import Tracer

BUILTIN = ("load_tasks", "seed_env", "simulate", "grade", "compare", "gate", "report", "log_wandb")


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
    restore: Callable[[NodeOutput, list[Any]], NodeOutput] | None = None
    always_run: bool = False  # cheap nodes whose key depends on their own output
    # Parameters that name files or folders, which must exist before anything runs.
    files: tuple[str, ...] = ()
    # Check the parameters' references (files, variants) before anything runs; raise SpecError.
    check: Callable[[Any], None] | None = None

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


def file_digest(path: str | Path) -> str:
    """SHA-256 of a file's bytes (or of a folder's files, sorted), for node identities."""
    path = Path(path)
    if not path.is_dir():
        stat = path.stat()
        return _one_file_digest(str(path), stat.st_mtime_ns, stat.st_size)
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(path)).encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


@functools.lru_cache(maxsize=4096)
def _one_file_digest(path: str, mtime_ns: int, size: int) -> str:
    """A file's digest, read once while it is unchanged (every task of a suite names the same
    domain source and checker files)."""
    digest = hashlib.sha256(Path(path).name.encode())
    digest.update(Path(path).read_bytes())
    return digest.hexdigest()


def source_digest(obj: Any) -> str:
    """SHA-256 of the source file that defines a class or function (a domain: its tools are its
    code), for node identities; '' when there is none (built in, or made at run time)."""
    try:
        path = inspect.getsourcefile(obj)
    except TypeError:
        return ""
    return file_digest(path) if path is not None and Path(path).is_file() else ""


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)

"""Plan and execute a DAG: validate it before anything runs (the standard library's
`graphlib` sorts it topologically and finds a cycle; networkx, used before, took a tenth of a
second to import in every command), run independent nodes concurrently, and reuse every node
whose work is unchanged.

A node's cache key is a hash of its kind, its resolved parameters, what identifies its work
(e.g. the agent variant's content hash) and the keys of its inputs; a finished node's output is
stored under that key, so a rerun of an unchanged pipeline reuses every node, and a changed
node invalidates exactly the nodes downstream of it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import graphlib
import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.pipeline.nodes import NODE_KINDS, NodeContext, NodeKind, canonical
from harness.pipeline.types import NodeOutput
from harness.specs.base import Spec
from harness.specs.dag import Dag
from harness.specs.load import Loaded
from harness.specs.located import Problem, SpecError, format_path, under
from harness.specs.validation import validate


@dataclass
class PlannedNode:
    """A node ready to run: its kind and validated parameters."""

    id: str
    kind: NodeKind
    params: Any  # an instance of `kind.params`, the Spec subclass the kind takes
    needs: list[str]
    resolved: Any = None  # what the kind's `check` resolved from the parameters (planning)


@dataclass
class Plan:
    """A validated pipeline, nodes in topological order."""

    name: str
    nodes: dict[str, PlannedNode]


@dataclass
class NodeStatus:
    """What happened to a node in one execution."""

    state: str  # ran, reused, failed, skipped
    kind: str
    key: str = ""
    started: float = 0.0
    finished: float = 0.0
    error: str = ""

    @property
    def seconds(self) -> float:
        return self.finished - self.started


def plan(loaded: Loaded[Dag]) -> Plan:
    """Validate a DAG: node kinds, parameters, references, cycles and the types wired between
    nodes. All problems are raised together, each at its place in the file."""
    dag, problems = loaded.spec, []
    kinds: dict[str, NodeKind] = {}
    params: dict[str, Spec] = {}
    resolved: dict[str, Any] = {}
    for node_id, node in dag.nodes.items():
        kind = NODE_KINDS.get(node.uses)
        if kind is None:
            close = difflib.get_close_matches(node.uses, NODE_KINDS.names(), n=1)
            hint = (
                f"did you mean '{close[0]}'?"
                if close
                else "known: " + ", ".join(NODE_KINDS.names())
            )
            problems.append(
                loaded.problem(
                    ("nodes", node_id, "uses"), f"unknown node kind '{node.uses}'; {hint}"
                )
            )
            continue
        kinds[node_id] = kind
        prefix = ("nodes", node_id, "with")
        positions = under(loaded.positions, prefix)
        try:
            params[node_id] = validate(kind.params, node.with_, positions, loaded.path)
        except SpecError as exc:
            where = format_path(prefix)
            problems += [
                Problem(p.location, f"{where}.{p.path}" if p.path else where, p.message)
                for p in exc.problems
            ]
        else:
            missing = _missing_files(loaded, node_id, kind, params[node_id])
            problems += missing
            try:
                if kind.check is not None and not missing:
                    resolved[node_id] = kind.check(params[node_id])
            except SpecError as exc:  # located in the files the parameters name
                problems += exc.problems
        for index, need in enumerate(node.needs):
            if need not in dag.nodes or need == node_id:
                problems.append(
                    loaded.problem(("nodes", node_id, "needs", index), f"unknown node '{need}'")
                )
        if not kind.accepts(len(node.needs)):
            expected = _arity(kind)
            problems.append(
                loaded.problem(
                    ("nodes", node_id, "needs"),
                    f"{kind.name} takes {expected}, got {len(node.needs)}",
                )
            )
    graph = graphlib.TopologicalSorter(
        {
            node_id: [need for need in node.needs if need in dag.nodes and need != node_id]
            for node_id, node in dag.nodes.items()
        }
    )
    order: list[str] = []
    try:
        order = list(graph.static_order())
    except graphlib.CycleError as cycle_error:
        cycle = cycle_error.args[1][:-1]  # [a, b, a]: b needs a, which needs b
        path = " -> ".join([*cycle, cycle[0]])
        problems.append(loaded.problem(("nodes", cycle[0], "needs"), f"cycle: {path}"))
    else:
        for node_id, node in dag.nodes.items():
            kind = kinds.get(node_id)
            for index, need in enumerate(node.needs):
                producer = kinds.get(need)
                if (
                    kind is None
                    or producer is None
                    or (not kind.variadic and index >= len(kind.inputs))
                ):
                    continue
                accepted = kind.input_types(index)
                if not issubclass(producer.output, accepted):
                    names = " or ".join(t.__name__ for t in accepted)
                    problems.append(
                        loaded.problem(
                            ("nodes", node_id, "needs", index),
                            f"{kind.name} takes {names} here, but '{need}' ({producer.name}) gives "
                            f"{producer.output.__name__}",
                        )
                    )
    if problems:
        raise SpecError(sorted(problems, key=lambda p: (p.location.line or 0, p.location.col or 0)))
    return Plan(
        dag.name,
        {
            node_id: PlannedNode(
                node_id,
                kinds[node_id],
                params[node_id],
                list(dag.nodes[node_id].needs),
                resolved.get(node_id),
            )
            for node_id in order
        },
    )


def _missing_files(
    loaded: Loaded[Dag], node_id: str, kind: NodeKind, params: Spec
) -> list[Problem]:
    """A problem for each file a node's parameters name that does not exist."""
    problems = []
    for name in kind.files:
        value = getattr(params, name)
        alias = kind.params.model_fields[name].alias or name
        for index, path in enumerate(value if isinstance(value, list) else [value]):
            if path is not None and not Path(path).exists():
                keys = (
                    ("nodes", node_id, "with", alias, index)
                    if isinstance(value, list)
                    else ("nodes", node_id, "with", alias)
                )
                problems.append(loaded.problem(keys, f"no such file or folder: {path}"))
    return problems


def _arity(kind: NodeKind) -> str:
    if kind.variadic:
        return f"at least {len(kind.inputs)} input(s)"
    low, high = len(kind.inputs) - kind.optional, len(kind.inputs)
    return f"{low} input(s)" if low == high else f"{low} to {high} inputs"


def _key(*parts: Any) -> str:
    return hashlib.sha256(canonical(parts).encode()).hexdigest()[:32]


def _stored_output(base: NodeContext, key: str, kind: NodeKind) -> NodeOutput | None:
    """A node's cached output; None when there is none or it no longer fits the kind's output
    type (written by an older harness), so that the node runs again."""
    text = base.store.node_output(key)
    if text is None:
        return None
    try:
        return kind.output.model_validate_json(text)
    except ValidationError:
        return None


class _Skipped(Exception):
    """A node whose inputs failed."""


@dataclass
class Execution:
    """The outputs and the fate of every node of one pipeline execution."""

    outputs: dict[str, NodeOutput] = field(default_factory=dict)
    statuses: dict[str, NodeStatus] = field(default_factory=dict)
    finished: bool = False  # every node had its turn (none was cut short by an exception)

    @property
    def failed(self) -> list[str]:
        return [n for n, s in self.statuses.items() if s.state == "failed"]


async def execute(
    pipeline: Plan, base: NodeContext, execution: Execution | None = None
) -> Execution:
    """Run every node as soon as its needs are done; independent nodes run concurrently. A
    node whose kind `follows` its inputs starts as soon as they have announced their outputs
    (`NodeContext.announce`: `simulate` announces its run as it starts), so that `grade` grades
    episodes while they are played. A `SpecError` raised by a node (bad input found late)
    stops the whole pipeline. The statuses are filled in `execution` as nodes go, so they
    survive a failure."""
    execution = execution if execution is not None else Execution()
    keys: dict[str, str] = {}
    tasks: dict[str, asyncio.Task[NodeOutput]] = {}
    announced: dict[str, asyncio.Future[NodeOutput]] = {}

    async def early_output(need: str) -> NodeOutput:
        """A need's announced output, or its final one (its failure, if it failed first)."""
        done, _ = await asyncio.wait(
            (announced[need], tasks[need]), return_when=asyncio.FIRST_COMPLETED
        )
        return announced[need].result() if announced[need] in done else tasks[need].result()

    def announce(node_id: str, output: NodeOutput) -> None:
        if node_id in keys:  # an `always_run` node's key is known once it is done, not before
            _announce(announced[node_id], output)

    async def final_outputs(node: PlannedNode) -> list[NodeOutput]:
        """The needs' outputs; a follower that stops waiting does not stop what it follows."""
        try:
            return [await asyncio.shield(tasks[need]) for need in node.needs]
        except Exception as exc:
            raise _Skipped(node.id) from exc

    async def run_node(node: PlannedNode) -> NodeOutput:
        status = execution.statuses[node.id] = NodeStatus("skipped", node.kind.name)
        try:
            if node.kind.follows:
                inputs = [await early_output(need) for need in node.needs]
            else:
                inputs = [await tasks[need] for need in node.needs]
        except BaseException as exc:
            raise _Skipped(node.id) from exc
        status.started = time.monotonic()
        ctx = dataclasses.replace(
            base,
            node_id=node.id,
            key="",
            resolved=node.resolved,
            announce=lambda output: announce(node.id, output),
            inputs_done=lambda: final_outputs(node),
        )
        params = node.params.model_dump(mode="json", by_alias=True)
        try:
            if node.kind.always_run:
                output = await node.kind.run(node.params, inputs, ctx)
                key = _key(node.kind.name, params, output.model_dump(mode="json"))
                cached = base.store.node_output(key)
                status.state = "reused" if cached is not None else "ran"
            else:
                identity = node.kind.identity(node.params, ctx) if node.kind.identity else {}
                key = _key(node.kind.name, params, identity, [keys[n] for n in node.needs])
                keys[node.id] = key  # known before it runs: a follower's key includes it
                stored = None if base.fresh else _stored_output(base, key, node.kind)
                if stored is not None:
                    output = stored
                    if node.kind.restore is not None:
                        output = node.kind.restore(output, await final_outputs(node))
                    status.state = "reused"
                else:
                    ctx.key = key
                    output = await node.kind.run(node.params, inputs, ctx)
                    status.state = "ran"
            if node.kind.follows:
                await final_outputs(node)  # a follower finishes after what it follows
            base.store.put_node_output(
                key, node.kind.name, output.model_dump(mode="json"), base.pipeline_id
            )
        except SpecError:
            status.state = "failed"
            raise
        except _Skipped:  # what it followed failed: what it stored stays, for --resume
            status.state = "skipped"
            raise
        except Exception as exc:
            status.state, status.error = "failed", f"{type(exc).__name__}: {exc}"
            raise
        except asyncio.CancelledError:  # Ctrl-C: what it stored stays, for --resume
            status.state, status.error = "failed", "interrupted"
            raise
        finally:
            status.finished = time.monotonic()
        status.key = keys[node.id] = key
        execution.outputs[node.id] = output
        _announce(announced[node.id], output)
        return output

    loop = asyncio.get_running_loop()
    for node in pipeline.nodes.values():
        announced[node.id] = loop.create_future()
        tasks[node.id] = asyncio.create_task(run_node(node), name=node.id)
    results = await asyncio.gather(*tasks.values(), return_exceptions=True)
    for future in announced.values():
        future.cancel()  # never announced: its node failed, and its followers know it
    for result in results:
        if isinstance(result, SpecError):
            raise result
    return execution


def _announce(future: asyncio.Future[NodeOutput], output: NodeOutput) -> None:
    """What a node's followers may start from: the first announcement stands."""
    if not future.done():
        future.set_result(output)

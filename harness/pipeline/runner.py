"""Run a pipeline from a DAG file, from `run-eval` flags, or from a stored execution (resume):
resolve `--set` overrides, plan, open the store, model runtime and tracer, execute, record."""

from __future__ import annotations

import asyncio
import copy
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.pipeline.dag import Execution, Plan, execute, plan
from harness.pipeline.nodes import NodeContext
from harness.pipeline.progress import Board
from harness.specs.dag import Dag
from harness.specs.load import (
    Loaded,
    Location,
    Override,
    PathKey,
    SpecError,
    apply_overrides,
    read_mapping,
    validate,
)
from harness.store import Store

# `--set` shortcuts of the flag forms: scope -> the (node, parameter) lists that collect them
Shortcuts = dict[str, list[tuple[str, str]]]
RUN_EVAL_SHORTCUTS: Shortcuts = {
    "agent": [("simulate", "set")],
    "task": [("tasks", "set")],
    "persona": [("tasks", "persona_set")],
}
COMPARE_SHORTCUTS: Shortcuts = {**RUN_EVAL_SHORTCUTS, "agent": [("a", "set"), ("b", "set")]}


@dataclass
class RunOptions:
    """Settings of one execution that are not part of the pipeline's content."""

    store: Path = Path(".harness/results.db")
    cache: Path | None = Path(".harness/cache.db")
    prices: Path | None = None
    timeout_s: float = 60.0
    retries: int = 4
    weave_project: str | None = None
    traces: Path | None = Path(".harness/traces.db")
    fresh: bool = False
    progress: bool | None = None  # None: when the output is a terminal
    announce: bool = True  # print the pipeline's id as it starts


@dataclass
class Outcome:
    """A finished (or failed) pipeline execution."""

    pipeline_id: str
    plan: Plan
    execution: Execution
    config: dict[str, Any] = field(default_factory=dict)


def read_dag(path: Path) -> tuple[dict[str, Any], dict[PathKey, Location]]:
    data, positions = read_mapping(path)
    if data.get("kind") != "dag":
        where = positions.get(("kind",), Location(str(path), 1, 1))
        raise SpecError.at(where, "kind", f"expected a 'dag' file, found {data.get('kind')!r}")
    return data, positions


def with_overrides(
    data: dict[str, Any],
    positions: dict[PathKey, Location],
    texts: list[str],
    shortcuts: Shortcuts | None = None,
) -> dict[str, Any]:
    """Apply `--set node.param=value` (and, in the flag forms, `agent.`/`task.`/`persona.`
    shortcuts) to the pipeline's data."""
    data = copy.deepcopy(data)
    nodes = data.get("nodes") or {}
    shortcuts = shortcuts or {}
    patches: list[Override] = []
    for text in texts:
        override = Override.parse(text)
        scope = str(override.keys[0])
        if scope in shortcuts and len(override.keys) > 1:
            for node, param in shortcuts[scope]:
                nodes[node].setdefault("with", {}).setdefault(param, []).append(text)
            continue
        if scope not in nodes or len(override.keys) < 2:
            known = ", ".join(nodes)
            extra = " or agent./task./persona.FIELD=VALUE" if shortcuts else ""
            raise SpecError.at(
                Location(f"--set {text}"), "", f"expected NODE.PARAM=VALUE{extra}; nodes: {known}"
            )
        patches.append(Override(text, ("nodes", scope, "with", *override.keys[1:]), override.value))
    return apply_overrides(data, patches, positions)


def prepare(data: dict[str, Any], positions: dict[PathKey, Location], source: Path) -> Plan:
    """Validate and plan the pipeline's data."""
    return plan(Loaded(validate(Dag, data, positions, source), source, positions))


def run_pipeline(
    data: dict[str, Any],
    positions: dict[PathKey, Location],
    source: Path,
    options: RunOptions,
    pipeline_id: str = "",
) -> Outcome:
    """Plan and execute a pipeline; its resolved configuration is stored with the execution."""
    from harness.models import CallPolicy, ModelRuntime, PriceTable, ResponseCache
    from harness.tracing import NO_TRACER, open_tracer

    pipeline = prepare(data, positions, source)
    runtime = ModelRuntime(
        cache=ResponseCache(options.cache) if options.cache else None,
        prices=PriceTable(options.prices),
        policy=CallPolicy(timeout_s=options.timeout_s, max_retries=options.retries),
    )
    config = {"source": str(source), "dag": data}
    store = Store(options.store)
    pipeline_id = store.new_pipeline(pipeline.name, config, pipeline_id)
    if options.announce:  # the id to resume with, should the process die
        print(f"pipeline {pipeline_id} ({pipeline.name}) started", file=sys.stderr, flush=True)
    tracing = options.traces is not None or options.weave_project is not None
    tracer = open_tracer(options.weave_project, options.traces or Path()) if tracing else NO_TRACER
    execution, status = Execution(), "failed"
    try:
        with Board(enabled=options.progress) as board:
            base = NodeContext(
                store, runtime, tracer, board, pipeline_id, "", fresh=options.fresh, config=config
            )

            async def main() -> Execution:
                try:
                    return await execute(pipeline, base, execution)
                finally:
                    await runtime.aclose()

            asyncio.run(main())
        status = "failed" if execution.failed else "done"
    finally:
        begin = min((s.started for s in execution.statuses.values() if s.started), default=0.0)
        nodes = {
            node_id: {
                "kind": s.kind,
                "state": s.state,
                "key": s.key,
                "error": s.error,
                "start_s": round(max(s.started - begin, 0.0), 3),
                "end_s": round(max(s.finished - begin, 0.0), 3),
            }
            for node_id, s in execution.statuses.items()
        }
        store.finish_pipeline(pipeline_id, status, nodes)
        store.close()
        runtime.close()
        tracer.close()
    return Outcome(pipeline_id, pipeline, execution, config)

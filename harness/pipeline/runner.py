"""Run a pipeline from its data (a DAG file's, a template's, or a stored execution's): resolve
`--set` overrides, plan, open the store, model runtime and tracer, execute, record."""

from __future__ import annotations

import asyncio
import copy
import gc
from collections.abc import Callable, MutableMapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import defaults
from harness.defaults import MODEL_RETRIES, MODEL_TIMEOUT_S
from harness.engine.executors import check_executor
from harness.pipeline.dag import Execution, Plan, PlannedNode, execute, plan
from harness.pipeline.nodes import NodeContext
from harness.specs.dag import Dag
from harness.specs.kinds import read_mapping
from harness.specs.load import Loaded
from harness.specs.located import Location, PathKey, Problem, SpecError
from harness.specs.overrides import Override, apply_overrides
from harness.specs.validation import validate
from harness.store import Store, new_id
from harness.store_location import StoreLocation, StoreTarget

if TYPE_CHECKING:
    from harness.models import ModelRuntime
    from harness.pipeline.types import Graded, Report
    from harness.specs.agent import ModelRef

# `--set` shortcuts of a pipeline template: scope -> the (node, parameter) lists that collect
# `scope.PATH=VALUE` overrides.
Shortcuts = dict[str, list[tuple[str, str]]]


@dataclass
class RunOptions:
    """Settings of one execution that are not part of the pipeline's content."""

    store: StoreTarget = defaults.RESULTS_STORE  # a SQLite file or a PostgreSQL URL
    cache: Path | None = defaults.RESPONSE_CACHE
    prices: Path | None = None
    timeout_s: float = MODEL_TIMEOUT_S
    retries: int = MODEL_RETRIES
    weave_project: str | None = None
    traces: Path | None = defaults.TRACE_STORE
    fresh: bool = False
    progress: bool | None = None  # None: when the output is a terminal
    # Told the pipeline's id and name as it starts: the id to resume with, should the process die.
    on_start: Callable[[str, str], None] | None = None
    # Where `simulate` nodes play episodes: None leaves it to each node (default local).
    executor: str | None = None
    workers: int | None = None  # Ray workers (default: one per CPU of the Ray cluster)
    # The judge of grade nodes that name none (`--judge-model`); None: the project file's.
    judge_model: ModelRef | None = None
    # Leave the results store open in the outcome (`Outcome.store`) for the caller to read
    # and close, rather than open it a second time to print the summary.
    keep_store: bool = False
    # Checker code may run without OS isolation where there is none (`--unsafe-checkers`);
    # otherwise a pipeline with python checks is refused before it starts.
    unsafe_checkers: bool = False


def model_runtime(options: RunOptions) -> ModelRuntime:
    """The model runtime the options describe: response cache, prices and retry policy."""
    from harness.models import CallPolicy, ModelRuntime, PriceTable, ResponseCache

    return ModelRuntime(
        cache=ResponseCache(options.cache) if options.cache else None,
        prices=PriceTable(options.prices),
        policy=CallPolicy(timeout_s=options.timeout_s, max_retries=options.retries),
    )


@dataclass
class Outcome:
    """A finished (or failed) pipeline execution."""

    pipeline_id: str
    plan: Plan
    execution: Execution
    config: dict[str, Any] = field(default_factory=dict)
    store: Store | None = None  # still open, with `RunOptions.keep_store`

    @property
    def graded(self) -> dict[str, Graded]:
        """The graded runs the pipeline produced, by run id."""
        from harness.pipeline.types import Graded

        outputs = self.execution.outputs.values()
        return {o.run_id: o for o in outputs if isinstance(o, Graded)}

    @property
    def reports(self) -> list[Report]:
        """The reports the pipeline's report nodes made."""
        from harness.pipeline.types import Report

        return [o for o in self.execution.outputs.values() if isinstance(o, Report)]

    def close(self) -> None:
        """Close the store the outcome kept open, if any."""
        if self.store is not None:
            self.store.close()
            self.store = None


def read_dag(path: Path) -> tuple[dict[str, Any], MutableMapping[PathKey, Location]]:
    data, positions = read_mapping(path)
    if data.get("kind") != "dag":
        where = positions.get(("kind",), Location(str(path), 1, 1))
        raise SpecError.at(where, "kind", f"expected a 'dag' file, found {data.get('kind')!r}")
    return data, positions


def with_overrides(
    data: dict[str, Any],
    positions: MutableMapping[PathKey, Location],
    texts: list[str],
    shortcuts: Shortcuts | None = None,
) -> dict[str, Any]:
    """Apply `--set node.param=value` overrides (and a template's `scope.PATH=VALUE`
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
            scopes = "/".join(f"{name}." for name in shortcuts)
            extra = f" or {scopes}FIELD=VALUE" if shortcuts else ""
            raise SpecError.at(
                Location(f"--set {text}"), "", f"expected NODE.PARAM=VALUE{extra}; nodes: {known}"
            )
        patches.append(Override(text, ("nodes", scope, "with", *override.keys[1:]), override.value))
    return apply_overrides(data, patches, positions)


def stored_pipeline(
    store_path: StoreTarget, pipeline_id: str
) -> tuple[dict[str, Any], MutableMapping[PathKey, Location], Path]:
    """A stored execution's pipeline data and source, to resume it."""
    info = None
    if StoreLocation.of(store_path).exists():
        store = Store(store_path)
        info = store.pipeline(pipeline_id)
        store.close()
    if info is None:
        where = Location(str(StoreLocation.of(store_path)))
        raise SpecError.at(where, "", f"no pipeline {pipeline_id!r} to resume")
    return info.config["dag"], {}, Path(info.config["source"])


def preflight(pipeline: Plan) -> None:
    """Check the agent of every simulate node against the tasks of the load_tasks node it needs
    (its tools, and what its checks must observe) before anything is written; a pipeline would
    otherwise find a mismatch only when the simulate node starts."""
    from harness.pipeline.nodes.load_tasks import planned_tasks
    from harness.pipeline.nodes.simulate import load_variant
    from harness.sim.suite import check_variant

    problems, task_sets = [], {}
    for node in pipeline.nodes.values():
        source = task_source(pipeline, node) if node.kind.name == "simulate" else None
        if source is None:
            continue
        try:
            if source.id not in task_sets:
                task_sets[source.id] = planned_tasks(source)
            variant = node.resolved if node.resolved is not None else load_variant(node.params)
            check_variant(variant, task_sets[source.id].cases)
        except SpecError as exc:
            problems += exc.problems
    if problems:
        raise SpecError(list(dict.fromkeys(problems)))


def task_source(pipeline: Plan, node: PlannedNode) -> PlannedNode | None:
    """The load_tasks node whose tasks reach a node, through nodes that pass tasks on (a
    `seed_env` between them changes their start state, not their domain or checks)."""
    from harness.pipeline.types import Tasks

    current = node
    while current.needs:  # a plan has no cycle
        source = pipeline.nodes.get(current.needs[0])
        if source is None or source.kind.output is not Tasks:
            return None
        if source.kind.name == "load_tasks":
            return source
        current = source
    return None


def prepare(
    data: dict[str, Any], positions: MutableMapping[PathKey, Location], source: Path
) -> Plan:
    """Validate and plan the pipeline's data."""
    return plan(Loaded(validate(Dag, data, positions, source), source, positions))


def run_pipeline(
    data: dict[str, Any],
    positions: MutableMapping[PathKey, Location],
    source: Path,
    options: RunOptions,
    pipeline_id: str = "",
) -> Outcome:
    """Plan, check (`preflight`, a judge for the tasks that need one, OS isolation for python
    checks) and execute a pipeline; its resolved configuration (grade nodes' default judge
    included) is stored with the execution. Nothing is written before the pipeline has passed
    its checks."""
    from harness.engine.progress import Board  # rich: only for a run, not a check
    from harness.grading.requirements import resolve_judge
    from harness.tracing import NO_TRACER, open_run_tracer

    judge = resolve_judge(options.judge_model, Location("--judge-model"), "")
    data = with_default_judge(data, judge)
    pipeline = prepare(data, positions, source)
    if options.executor is not None:
        check_executor(options.executor)
    preflight(pipeline)
    require_judges(pipeline)
    require_isolation(pipeline, options.unsafe_checkers)
    config = {"source": str(source), "dag": data}
    pipeline_id = pipeline_id or new_id("dag-")
    execution = Execution()
    with ExitStack() as resources:  # closed in reverse order, whatever happens
        # What is loaded now lives as long as the run: the collector need not walk it again.
        gc.freeze()
        resources.callback(gc.unfreeze)
        store = Store(options.store)
        kept = resources.enter_context(ExitStack())  # closed now unless the caller keeps it
        kept.callback(store.close)
        # Refused while another process runs this pipeline; released when this one ends.
        resources.enter_context(store.pipeline_lock(pipeline_id))
        runtime = model_runtime(options)
        resources.callback(runtime.close)
        store.new_pipeline(pipeline.name, config, pipeline_id)
        if options.on_start is not None:
            options.on_start(pipeline_id, pipeline.name)
        tracing = options.traces is not None or options.weave_project is not None
        tracer = (
            open_run_tracer(options.weave_project, options.traces or Path())
            if tracing
            else NO_TRACER
        )
        resources.callback(tracer.close)
        resources.callback(_record, store, pipeline_id, execution)
        with Board(enabled=options.progress) as board:
            base = NodeContext(
                store,
                runtime,
                tracer,
                board,
                pipeline_id,
                "",
                fresh=options.fresh,
                config=config,
                executor=options.executor,
                workers=options.workers,
                unsafe_checkers=options.unsafe_checkers,
            )

            async def main() -> Execution:
                try:
                    return await execute(pipeline, base, execution)
                finally:
                    await runtime.aclose()

            asyncio.run(main())
        execution.finished = True
        if options.keep_store:
            kept.pop_all()
    return Outcome(pipeline_id, pipeline, execution, config, store if options.keep_store else None)


def _record(store: Store, pipeline_id: str, execution: Execution) -> None:
    """Store what each node did, and the pipeline's status (failed unless it ran to the end
    with no node failed)."""
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
    status = "done" if execution.finished and not execution.failed else "failed"
    store.finish_pipeline(pipeline_id, status, nodes)


# No implicit judge, for pipelines: a grade node's default judge, and a pipeline whose tasks need a
# judge and have none stops before it plays (`harness.grading.requirements`).


def with_default_judge(data: dict[str, Any], judge: ModelRef | None) -> dict[str, Any]:
    """The pipeline's data with `judge` given to every grade node that names no judge, so that
    the stored configuration (and a resumed execution) says which judge graded."""
    if judge is None:
        return data
    nodes = data.get("nodes")
    if not isinstance(nodes, dict):
        return data
    value = judge.model_dump(mode="json", exclude_none=True)
    updated = dict(nodes)
    for node_id, node in nodes.items():
        if not isinstance(node, dict) or node.get("uses") != "grade":
            continue
        params = node.get("with") or {}
        if isinstance(params, dict) and params.get("judge_model") is None:
            updated[node_id] = {**node, "with": {**params, "judge_model": value}}
    return {**data, "nodes": updated}


def require_judges(pipeline: Plan, hint: str | None = None) -> None:
    """Raise a SpecError, one line per task set, when a grade node has no judge while tasks it
    grades have `llm_judge` checks that name no model (`hint`: how to give one; by default
    `harness.grading.requirements.JUDGE_HINT`)."""
    from harness.grading.requirements import JUDGE_HINT, missing_judge
    from harness.pipeline.nodes.load_tasks import planned_tasks

    hint = JUDGE_HINT if hint is None else hint
    problems = []
    for node in pipeline.nodes.values():
        if node.kind.name != "grade" or getattr(node.params, "judge_model", None) is not None:
            continue
        for source in task_sources(pipeline, node.id):
            message = missing_judge(planned_tasks(source).cases)
            if message is not None:
                where = Location(", ".join(source.params.paths))
                problems.append(Problem(where, "", f"{message}: {hint}"))
    if problems:
        raise SpecError(list(dict.fromkeys(problems)))


def task_sources(pipeline: Plan, node_id: str) -> list[Any]:
    """The load_tasks nodes upstream of a node."""
    found, seen, todo = [], set(), [node_id]
    while todo:
        node = pipeline.nodes[todo.pop()]
        if node.id in seen:
            continue
        seen.add(node.id)
        if node.kind.name == "load_tasks":
            found.append(node)
        todo += [need for need in node.needs if need in pipeline.nodes]
    return found


# No sandbox, no checker code. A python check's code runs only under OS isolation (bubblewrap, or
# Docker where an engine answers). Where there is neither, a run whose graded tasks have python
# checks stops before it plays or writes anything, unless the user allowed checker code to run
# without isolation (`--unsafe-checkers`, a grade node's `sandbox: none`, `HARNESS_SANDBOX=none`):
# every check would otherwise end as an error, or run code that can reach the harness's secrets.


def require_isolation(pipeline: Plan, unsafe: bool = False) -> None:
    """Raise a SpecError, one line, when grade nodes would run checker code of their tasks
    where they may not: without OS isolation and without permission (`unsafe`, the node's
    `sandbox: none`), or without the backend `HARNESS_SANDBOX` forces."""
    from harness.grading.requirements import missing_isolation
    from harness.pipeline.nodes.load_tasks import planned_tasks

    sources: dict[bool, dict[str, PlannedNode]] = {False: {}, True: {}}  # by permission
    for node in pipeline.nodes.values():
        if node.kind.name == "grade":
            allowed = unsafe or getattr(node.params, "sandbox", "auto") == "none"
            sources[allowed].update({s.id: s for s in task_sources(pipeline, node.id)})
    for allowed, found in sources.items():
        if not found:
            continue
        # The tasks are loaded already (planning did); asking for isolation probes for a
        # Docker engine and bubblewrap, which only tasks with checks that run code need.
        cases = [case for source in found.values() for case in planned_tasks(source).cases]
        message = missing_isolation(cases, allowed)
        if message is not None:
            paths = dict.fromkeys(path for source in found.values() for path in source.params.paths)
            raise SpecError.at(Location(", ".join(paths)), "", message)

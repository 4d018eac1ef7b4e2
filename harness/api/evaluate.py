"""Evaluate an agent on a suite: play every task's trials into the results store, grade them
there, and give back the run's figures. The same engine as `harness run-eval` (which runs it
as a pipeline of nodes), called directly with the suite and the agent loaded once."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
from collections.abc import Coroutine
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, TypeAlias, TypeVar

from harness import defaults
from harness.api.agent import Agent, as_agent
from harness.api.results import RunResult
from harness.api.suite import Suite, TaskPaths, as_suite
from harness.engine.context import Engine
from harness.engine.executors import check_executor
from harness.engine.grade import claim_grading, grade_run
from harness.engine.play import play_run, run_config
from harness.engine.progress import Board
from harness.grading.requirements import check_gradable, resolve_judge
from harness.models import CallPolicy, ModelRuntime, PriceTable, ResponseCache
from harness.options import EvalOptions, ModelOption, RuntimeOptions, checked
from harness.sim.suite import check_variant
from harness.specs.located import Location
from harness.store import Store
from harness.store_location import StoreTarget
from harness.tracing import NO_TRACER, open_run_tracer

T = TypeVar("T")


def open_runtime(
    cache: Path | None = defaults.RESPONSE_CACHE,
    prices: Path | None = None,
    timeout_s: float = defaults.MODEL_TIMEOUT_S,
    retries: int = defaults.MODEL_RETRIES,
) -> ModelRuntime:
    """A model runtime: its response cache, prices and retry policy (`RuntimeOptions`: a
    timeout of 0.01 to 86,400 s, 0 to 100 retries; `BadOptions` names a value out of range)."""
    checked(
        RuntimeOptions, "open_runtime", cache=cache, prices=prices, timeout_s=timeout_s,
        retries=retries,
    )  # fmt: skip
    return ModelRuntime(
        cache=ResponseCache(cache) if cache else None,
        prices=PriceTable(prices),
        policy=CallPolicy(timeout_s=timeout_s, max_retries=retries),
    )


JudgeModel: TypeAlias = ModelOption
"""A judge model: a `ModelRef`, a mapping like `{"id": "openai/gpt-4.1-mini"}`, or a model id."""


async def evaluate_async(
    suite: Suite | TaskPaths,
    agent: Agent | str | os.PathLike[str],
    *,
    trials: int = 1,
    concurrency: int = defaults.CONCURRENCY,
    store: StoreTarget = defaults.RESULTS_STORE,
    judge_model: JudgeModel | None = None,
    runtime: ModelRuntime | None = None,
    traces: Path | None = None,
    weave_project: str | None = None,
    executor: str | None = None,
    unsafe_checkers: bool = False,
    progress: bool | None = False,
    workers: int | None = None,
) -> RunResult:
    """`evaluate` for code that is already in an event loop: `await harness.evaluate_async(...)`.

    `suite` is a `Suite` or task files and folders (a path or a list of paths, loaded with
    `load_suite`); `agent` an `Agent` or an agent file (loaded with `load_agent`). Every option
    is checked by `EvalOptions` before anything is played or stored: `trials` 1 to
    `defaults.MAX_TRIALS`, `concurrency` 1 to `defaults.MAX_CONCURRENCY`, `executor` local or
    ray (`workers`: Ray workers, 1 or more), `unsafe_checkers` and `progress` booleans (the
    string "false" is refused, not truthy); `judge_model` a model reference whose scripted
    rules file exists. A bad one is `BadOptions` (a `ValueError`; a `TypeError` too for an
    argument of the wrong kind) naming it and what was expected."""
    options = checked(
        EvalOptions,
        "evaluate",
        trials=trials,
        concurrency=concurrency,
        store=store,
        judge_model=judge_model,
        runtime=runtime,
        traces=traces,
        weave_project=weave_project,
        executor=executor,
        workers=workers,
        unsafe_checkers=unsafe_checkers,
        progress=progress,
    )
    if executor is not None:
        check_executor(executor, "evaluate: executor")
    trials, concurrency, workers = options.trials, options.concurrency, options.workers
    traces = options.traces  # a str given is a Path
    judge = resolve_judge(judge_model, Location("evaluate"))
    suite, agent = as_suite(suite, "evaluate"), as_agent(agent, "evaluate")
    check_variant(agent.loaded, suite.cases)
    check_gradable(suite.cases, judge, unsafe_checkers, Location("evaluate"))
    async with AsyncExitStack() as resources:
        opened = Store(store)
        resources.callback(opened.close)
        if runtime is None:
            runtime = open_runtime()
            resources.callback(runtime.close)  # after aclose: the stack unwinds last first
            resources.push_async_callback(runtime.aclose)
        tracing = traces is not None or weave_project is not None
        tracer = open_run_tracer(weave_project, traces or Path()) if tracing else NO_TRACER
        resources.callback(tracer.close)
        board = resources.enter_context(Board(enabled=progress))
        engine = Engine(
            opened,
            runtime,
            tracer,
            board,
            executor=executor,
            workers=workers,
            unsafe_checkers=unsafe_checkers,
        )
        config = run_config(
            agent.path, agent.overrides, agent.variant, trials, suite.source, suite.task_hashes
        )
        played = await play_run(
            engine, suite.cases, agent.variant, config, trials=trials, concurrency=concurrency
        )
        grading = f"evaluate/{played.run_id}"
        run_id = claim_grading(engine, played.run_id, judge, grading)
        await grade_run(engine, run_id, suite.cases, judge, grading, concurrency=concurrency)
        levels = {case.task.id: case.task.level for case in suite.cases}
        return RunResult.load(run_id, store, levels)


def evaluate(
    suite: Suite | TaskPaths,
    agent: Agent | str | os.PathLike[str],
    *,
    trials: int = 1,
    concurrency: int = defaults.CONCURRENCY,
    store: StoreTarget = defaults.RESULTS_STORE,
    judge_model: JudgeModel | None = None,
    runtime: ModelRuntime | None = None,
    traces: Path | None = None,
    weave_project: str | None = None,
    executor: str | None = None,
    unsafe_checkers: bool = False,
    progress: bool | None = False,
    workers: int | None = None,
) -> RunResult:
    """Play `trials` episodes of every task of `suite` with `agent`, grade them, store both,
    and return the run (`RunResult`). Works with or without a running event loop (in Jupyter,
    the work runs on a thread of its own).

    Args:
        suite: A `Suite`, or task files and folders (a path or a list of paths).
        agent: An `Agent`, or an agent variant file.
        trials: Episodes per task, 1 to `defaults.MAX_TRIALS`.
        concurrency: Episodes played (and graded) at once, 1 to `defaults.MAX_CONCURRENCY`.
        store: The results store: a SQLite file or a PostgreSQL URL.
        judge_model: The judge of `llm_judge` checks that name none (default: the project
            file's `judge_model`); a scripted judge's rules file must exist.
        runtime: A model runtime to share (`open_runtime`); default: one for this run.
        traces: A local trace store to record into.
        weave_project: A W&B project (entity/project) to trace to.
        executor: Where episodes are played: "local" (default) or "ray".
        unsafe_checkers: Let python checks run without OS isolation where there is none.
        progress: A live board (True), none (False), on a terminal only (None).
        workers: Ray workers (default: one per CPU).

    Raises:
        BadOptions: an option or argument `evaluate_async` refuses (see there), before
            anything is played or stored.
    """
    return run_sync(
        evaluate_async(
            suite,
            agent,
            trials=trials,
            concurrency=concurrency,
            store=store,
            judge_model=judge_model,
            runtime=runtime,
            traces=traces,
            weave_project=weave_project,
            executor=executor,
            unsafe_checkers=unsafe_checkers,
            progress=progress,
            workers=workers,
        )
    )


def run_sync(work: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to its end from synchronous code, inside a running event loop or not."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, work).result()

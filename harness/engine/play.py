"""Play a suite's trials against an agent variant into the store, as one run.

Episodes are stored one by one as they finish. A run keyed by the work's content (a pipeline
node's key) is resumed after a crash: only the episodes it is missing are played, none lost,
none twice. Where they are played is the executor's business (this process, or Ray workers).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.engine import make_executor
from harness.engine.context import Engine
from harness.engine.executors import EpisodeJob, EpisodeSetup, Jobs
from harness.sim.episode import episode_seed
from harness.sim.suite import TaskCase
from harness.specs.agent import AgentVariant
from harness.specs.load import variant_lineage
from harness.tracing import SpanResult
from harness.transcript import Transcript


def run_config(
    agent: Path,
    overrides: Sequence[str],
    variant: AgentVariant,
    trials: int,
    tasks: dict[str, Any],
    suite: dict[str, str],
) -> dict[str, Any]:
    """What a run records of how it was played, the same from `harness.evaluate` and a
    pipeline's `simulate` node: the agent file, its overrides and the variant they made (which
    the gate plays again), its lineage (the variant and the files it extends, nearest first), the
    trials, how the tasks were loaded (`tasks`) and each task's content hash (`suite`)."""
    return {
        "agent": str(agent),
        "overrides": list(overrides),
        "trials": trials,
        "variant": variant.model_dump(mode="json"),
        "tasks": tasks,
        "suite": suite,
        "lineage": variant_lineage(agent, variant.name),
    }


@dataclass(frozen=True)
class PlayedRun:
    """A run whose episodes are all in the store."""

    run_id: str
    variant: str
    variant_hash: str
    episodes: int


async def play_run(
    engine: Engine,
    cases: list[TaskCase],
    variant: AgentVariant,
    config: dict[str, Any],
    *,
    trials: int = 1,
    first_trial: int = 0,
    concurrency: int = 8,
    key: str = "",
    fresh: bool = True,
    label: str = "simulate",
    started: Callable[[str], None] | None = None,
) -> PlayedRun:
    """Play every case's trials (seeds `first_trial` on) and store them under one run, whose
    configuration records `config`. With a `key` and not `fresh`, the unfinished run of that
    key is resumed; otherwise a new run is started. `label` names the progress line;
    `started` is told the run's id before its first episode is played."""
    numbers = range(first_trial, first_trial + trials)
    wanted = [(case, trial) for case in cases for trial in numbers]
    return await play_trials(
        engine, cases, variant, config, wanted, concurrency=concurrency, key=key, fresh=fresh,
        label=label, started=started,
    )  # fmt: skip


async def play_trials(
    engine: Engine,
    cases: list[TaskCase],
    variant: AgentVariant,
    config: dict[str, Any],
    wanted: Sequence[tuple[TaskCase, int]],
    *,
    concurrency: int = 8,
    key: str = "",
    fresh: bool = False,
    label: str = "simulate",
    started: Callable[[str], None] | None = None,
) -> PlayedRun:
    """Play the given (case, trial number) episodes under one run of `cases`, each with its
    trial's seed: a whole suite's trials (`play_run`), or the few more trials of some tasks the
    gate plays as evidence. With a `key` and not `fresh`, the unfinished run of that key is
    resumed; otherwise a new run is started."""
    store, variant_hash = engine.store, variant.content_hash()
    pipeline = engine.pipeline_id or None
    async with contextlib.AsyncExitStack() as held:
        if fresh or not key:
            run_id = store.new_run(variant.name, variant_hash, config, key or None, pipeline)
        else:
            # Another process playing this key (an identical pipeline started meanwhile) holds
            # the run: wait for it, then play only what it left missing.
            lock = store.run_lock(key)
            await asyncio.to_thread(lock.__enter__)
            held.push(lock.__exit__)
            run_id = store.claim_run(variant.name, variant_hash, config, key, pipeline).id
        if started is not None:
            started(run_id)
        return await _play(engine, run_id, cases, variant, config, wanted, concurrency, label)


async def _play(
    engine: Engine,
    run_id: str,
    cases: list[TaskCase],
    variant: AgentVariant,
    config: dict[str, Any],
    wanted: Sequence[tuple[TaskCase, int]],
    concurrency: int,
    label: str,
) -> PlayedRun:
    """Play the episodes of a claimed run that are not stored yet, and finish it."""
    store, variant_hash = engine.store, variant.content_hash()
    store.add_run_tasks(run_id, cases, config.get("suite") or {})  # readers need no task file
    done = store.episode_keys(run_id)
    todo = [
        EpisodeJob(case, trial, episode_seed(case.task.id, trial))
        for case, trial in wanted
        if (case.task.id, trial) not in done
    ]
    tracker = engine.board.track(label, len(wanted))
    for _ in range(len(wanted) - len(todo)):
        tracker.advance()

    def stored_meanwhile(job: EpisodeJob) -> bool:  # by another process playing this run
        if store.has_episode(run_id, job.case.task.id, job.trial):
            tracker.advance()
            return True
        return False

    def finished(job: EpisodeJob, transcript: Transcript, span: SpanResult) -> None:
        store.add_episode(run_id, transcript, span.trace_id, span.call_id)
        tracker.advance(error=transcript.error is not None, usage=transcript.usage)

    jobs = Jobs(todo, stored_meanwhile, finished)
    setup = EpisodeSetup(variant, variant_hash, engine.runtime, concurrency)
    executor = make_executor(engine.executor or "local", engine.workers)
    attributes = {"run_id": run_id, "variant": variant.name, "variant_hash": variant_hash}
    span_inputs = {"run_id": run_id, "tasks": len(cases), "episodes": len(wanted)}
    with engine.tracer.span("harness.evaluation", span_inputs, attributes) as evaluation:
        await executor.play(jobs, setup)
        if evaluation is not None:
            evaluation.output = {"episodes": tracker.completed, "errors": tracker.errors}
    store.finish_run(run_id)
    return PlayedRun(run_id, variant.name, variant_hash, len(store.episode_keys(run_id)))

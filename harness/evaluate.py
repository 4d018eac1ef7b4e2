"""Run an eval: play every task's episodes against a variant, grade them and store them."""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from harness.grading.checks import CheckContext
from harness.grading.normative import grade
from harness.grading.result import Verdict
from harness.models import ModelRuntime
from harness.sim.agent import make_agent
from harness.sim.episode import EpisodeSpec, run_episode
from harness.sim.suite import TaskCase
from harness.specs.agent import AgentVariant, ModelRef
from harness.specs.task import Task
from harness.store import Store
from harness.tracing import NO_TRACER, Tracer, child_span
from harness.transcript import Transcript, Usage


class EpisodeFailed(Exception):
    """Marks an episode's trace as failed; the transcript still holds the details."""


def episode_seed(task_id: str, trial: int) -> int:
    """The seed of a task's trial: the same for every variant, so A/B runs are paired."""
    return int.from_bytes(hashlib.sha256(f"{task_id}:{trial}".encode()).digest()[:4], "big")


@dataclass
class EpisodeRow:
    """One finished episode as the summary shows it."""

    task_id: str
    level: int
    trial: int
    turns: int
    end_reason: str
    verdict: Verdict
    usage: Usage
    user_usage: Usage

    @classmethod
    def of(cls, task: Task, transcript: Transcript, verdict: Verdict) -> EpisodeRow:
        return cls(
            task.id,
            task.level,
            transcript.trial,
            transcript.turns,
            transcript.end_reason.value,
            verdict,
            transcript.usage,
            transcript.user_usage,
        )


@dataclass
class RunSummary:
    """What a finished run reports."""

    run_id: str
    variant: str
    variant_hash: str
    rows: list[EpisodeRow] = field(default_factory=list)


async def evaluate(
    cases: list[TaskCase],
    variant: AgentVariant,
    store: Store,
    trials: int = 1,
    concurrency: int = 8,
    config: dict[str, Any] | None = None,
    runtime: ModelRuntime | None = None,
    tracer: Tracer = NO_TRACER,
    judge_model: ModelRef | None = None,
) -> RunSummary:
    """Play `trials` episodes of every task (at most `concurrency` at once), grade and store
    each one as it finishes. With a tracer, the run is one `harness.evaluation` trace whose
    children are the episodes (turns, model calls and tool calls below them) and their grades."""
    runtime = runtime or ModelRuntime()
    variant_hash = variant.content_hash()
    run_id = store.new_run(variant.name, variant_hash, config or {})
    agent = make_agent(variant, runtime)
    summary = RunSummary(run_id, variant.name, variant_hash)
    limit = asyncio.Semaphore(concurrency)

    async def one(case: TaskCase, trial: int) -> tuple[TaskCase, Transcript, Verdict]:
        async with limit:
            seed = episode_seed(case.task.id, trial)
            spec = EpisodeSpec(
                task=case.task,
                persona=case.persona,
                agent=agent,
                variant_hash=variant_hash,
                initial_state=case.state,
                trial=trial,
                seed=seed,
                runtime=runtime,
            )
            inputs = {
                "task_id": case.task.id,
                "persona": case.persona.name,
                "trial": trial,
                "seed": seed,
            }
            with child_span(
                "harness.episode", inputs, {"task_id": case.task.id, "trial": trial}
            ) as episode:
                transcript = await run_episode(spec)
                episode.output = transcript
                if transcript.error is not None:
                    episode.error = EpisodeFailed(
                        f"{transcript.error.side}: {transcript.error.message}"
                    )
                with child_span("harness.grade", {"task_id": case.task.id}) as graded:
                    context = CheckContext(case.task, runtime, judge_model)
                    verdict = graded.output = await grade(transcript, context)
            return case, transcript, verdict

    jobs = [one(case, trial) for case in cases for trial in range(trials)]
    attributes = {"run_id": run_id, "variant": variant.name, "variant_hash": variant_hash}
    inputs = {"run_id": run_id, "tasks": len(cases), "trials": trials}
    try:
        with tracer.span("harness.evaluation", inputs, attributes) as evaluation:
            for finished in asyncio.as_completed(jobs):
                case, transcript, verdict = await finished
                store.add_episode(run_id, transcript, verdict)
                summary.rows.append(EpisodeRow.of(case.task, transcript, verdict))
            if evaluation is not None:
                evaluation.output = dict(Counter(row.verdict.outcome for row in summary.rows))
    finally:
        await runtime.aclose()
    summary.rows.sort(key=lambda row: (row.task_id, row.trial))
    store.finish_run(run_id)
    return summary


async def regrade(
    store: Store,
    run_id: str,
    cases: list[TaskCase],
    runtime: ModelRuntime,
    judge_model: ModelRef | None,
) -> RunSummary:
    """Grade a stored run's transcripts again with the tasks' current checks; the new verdicts
    are stored beside the old ones. Transcripts of tasks that no longer exist are skipped."""
    info = store.run(run_id)
    assert info is not None
    by_id = {case.task.id: case for case in cases}
    summary = RunSummary(run_id, info.variant, info.variant_hash)
    try:
        for transcript in store.transcripts(run_id):
            case = by_id.get(transcript.task_id)
            if case is None:
                continue
            verdict = await grade(transcript, CheckContext(case.task, runtime, judge_model))
            store.add_verdict(run_id, verdict)
            summary.rows.append(EpisodeRow.of(case.task, transcript, verdict))
    finally:
        await runtime.aclose()
    return summary

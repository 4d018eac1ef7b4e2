"""Run an eval: play every task's episodes against a variant, grade them and store them."""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from typing import Any

from harness.grading.normative import grade
from harness.grading.result import Verdict
from harness.models import ModelRuntime
from harness.sim.agent import make_agent
from harness.sim.episode import EpisodeSpec, run_episode
from harness.sim.suite import TaskCase
from harness.specs.agent import AgentVariant
from harness.store import Store
from harness.transcript import Transcript, Usage


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
) -> RunSummary:
    """Play `trials` episodes of every task (at most `concurrency` at once), grade and store
    each one as it finishes."""
    runtime = runtime or ModelRuntime()
    variant_hash = variant.content_hash()
    run_id = store.new_run(variant.name, variant_hash, config or {})
    agent = make_agent(variant, runtime)
    summary = RunSummary(run_id, variant.name, variant_hash)
    limit = asyncio.Semaphore(concurrency)

    async def one(case: TaskCase, trial: int) -> tuple[TaskCase, Transcript]:
        async with limit:
            spec = EpisodeSpec(
                task=case.task,
                persona=case.persona,
                agent=agent,
                variant_hash=variant_hash,
                initial_state=case.state,
                trial=trial,
                seed=episode_seed(case.task.id, trial),
                runtime=runtime,
            )
            return case, await run_episode(spec)

    jobs = [one(case, trial) for case in cases for trial in range(trials)]
    try:
        for finished in asyncio.as_completed(jobs):
            case, transcript = await finished
            verdict = grade(case.task, transcript)
            store.add_episode(run_id, transcript, verdict)
            summary.rows.append(
                EpisodeRow(
                    case.task.id,
                    case.task.level,
                    transcript.trial,
                    transcript.turns,
                    transcript.end_reason.value,
                    verdict,
                    transcript.usage,
                    transcript.user_usage,
                )
            )
    finally:
        await runtime.aclose()
    summary.rows.sort(key=lambda row: (row.task_id, row.trial))
    store.finish_run(run_id)
    return summary

"""Where a `simulate` node's episodes are played: `local` (on this process's event loop, the
default) or `ray` (as Ray tasks on a local Ray or a cluster, `harness.engine.ray_executor`);
`harness.engine.make_executor` gives the one a name stands for.

Both hand out the same jobs, play each with the same seed and record each finished episode the
same way (its `harness.episode` span, then the store, written only here in the driver), so an
executor changes where episodes run, never what they give.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from harness.models import ModelRuntime
from harness.production.episodes import trace_view
from harness.sim.agent import make_agent
from harness.sim.episode import EpisodeSpec, run_episode
from harness.sim.suite import TaskCase
from harness.specs.agent import AgentVariant
from harness.specs.located import Location, SpecError
from harness.tracing import SpanResult, child_span
from harness.transcript import Transcript

EXECUTORS = ("local", "ray")


class EpisodeFailed(Exception):
    """Marks an episode's trace as failed; the transcript still holds the details."""


@dataclass(frozen=True)
class EpisodeJob:
    """One episode to play: a task's trial and its seed."""

    case: TaskCase
    trial: int
    seed: int


@dataclass
class EpisodeSetup:
    """What every episode of one `simulate` node shares."""

    variant: AgentVariant
    variant_hash: str
    runtime: ModelRuntime  # the driver's: its cache, prices and call policy
    concurrency: int  # episodes at once (per worker, on Ray)


Finished = Callable[[EpisodeJob, Transcript, SpanResult], None]


class Jobs:
    """The episodes left to play, handed out one at a time (memory stays flat however many
    there are), and what happens to each finished one."""

    def __init__(
        self,
        todo: list[EpisodeJob],
        stored: Callable[[EpisodeJob], bool],
        finished: Finished,
    ):
        self.todo = todo[::-1]
        self.stored = stored  # played meanwhile by another process on the same run
        self.finished = finished

    def next(self) -> EpisodeJob | None:
        while self.todo:
            job = self.todo.pop()
            if not self.stored(job):
                return job
        return None


class Executor(Protocol):
    """Plays every job and records each as it finishes."""

    async def play(self, jobs: Jobs, setup: EpisodeSetup) -> None: ...


async def drain(jobs: Jobs, play: Callable[[EpisodeJob], Awaitable[Transcript]]) -> None:
    """One slot: play jobs one after another until none is left, each inside its episode span
    (nested spans of a local episode go under it; a remote one is recorded as it returns)."""
    while (job := jobs.next()) is not None:
        case = job.case
        inputs = {
            "task_id": case.task.id,
            "persona": case.persona_of(job.trial).name,
            "trial": job.trial,
            "seed": job.seed,
        }
        with child_span(
            "harness.episode", inputs, {"task_id": case.task.id, "trial": job.trial}
        ) as span:
            transcript = await play(job)
            if span.recording:
                span.output = trace_view(transcript, case.state)
            if transcript.error is not None:
                span.error = EpisodeFailed(f"{transcript.error.side}: {transcript.error.message}")
        jobs.finished(job, transcript, span)


class LocalExecutor:
    """Episodes on this process's event loop, `concurrency` at once (today's default)."""

    async def play(self, jobs: Jobs, setup: EpisodeSetup) -> None:
        agent = make_agent(setup.variant, setup.runtime)

        def episode(job: EpisodeJob) -> Awaitable[Transcript]:
            spec = EpisodeSpec(
                task=job.case.task,
                persona=job.case.persona_of(job.trial),
                agent=agent,
                variant_hash=setup.variant_hash,
                initial_state=job.case.state,
                trial=job.trial,
                seed=job.seed,
                runtime=setup.runtime,
                domain=job.case.domain,
            )
            return run_episode(spec)

        # No more slots than episodes: each is a task held in memory while it waits.
        slots = max(min(setup.concurrency, len(jobs.todo)), 1)
        await asyncio.gather(*(drain(jobs, episode) for _ in range(slots)))


def check_executor(name: str, where: str = "--executor") -> None:
    """An executor that cannot run here is bad input, found before anything is written."""
    if name not in EXECUTORS:
        raise SpecError.at(
            Location(where), "", f"unknown executor '{name}'; known: {', '.join(EXECUTORS)}"
        )
    if name == "ray" and importlib.util.find_spec("ray") is None:
        raise SpecError.at(
            Location(where), "", "the ray executor needs Ray: pip install 'harness[ray]'"
        )

"""The `ray` executor: a `simulate` node's episodes played by Ray workers.

The driver (the `harness` process) joins the cluster `RAY_ADDRESS` names, or starts a local Ray
in-process (no dashboard, no usage statistics). It keeps a pool of worker actors, one per CPU
unless told otherwise; each plays up to the node's `concurrency` episodes at once on its own
event loop, so CPU-bound parts of episodes (tool code, embedded models) spread over the workers
while model latency is still overlapped. Every episode is one Ray task carrying what it needs
(its task without checks, persona, start state, trial and seed); the variant, the call policy,
prices and cache file go once per node through the object store. A worker builds one model
runtime per node, whose remote endpoints' limits and retry budgets are global (`ray_limits`),
answers from the response cache file of its node (the same keys), and returns the transcript;
the driver
records each as it arrives (`executors.drain`) and alone writes the store. Workers trace nothing:
the driver records each episode's `harness.episode` span, from submission to return.

A worker that dies is restarted and its unfinished episodes are played again (Ray retries actor
tasks, `EPISODE_RETRIES` times), so no episode is lost; a dead driver is `--resume`d like any
run.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.engine.executors import EpisodeJob, EpisodeSetup, Jobs, drain
from harness.engine.ray_limits import EndpointLimits, SharedRuntime
from harness.models import CallPolicy, PriceTable, ResponseCache
from harness.specs.agent import AgentVariant
from harness.specs.located import Location, SpecError
from harness.specs.persona import Persona
from harness.specs.task import Task
from harness.transcript import Transcript

EPISODES_PER_WORKER_MAX = 1000
"""The most episodes a worker actor runs at once (the node's `concurrency` is what it gets)."""
EPISODE_RETRIES = 3
"""How often an episode is played again after its worker died: a worker killed with episodes in
flight loses none of them, and an episode that kills its worker every time fails the node (the
episodes stored so far are kept for `--resume`) instead of retrying forever."""
PLAYERS_KEPT = 4
"""Nodes whose runtime (and model clients) a worker keeps after their episodes are played."""


@dataclass(frozen=True)
class Episode:
    """What one Ray task needs to play an episode."""

    task: Task  # without its checks: the driver grades
    persona: Persona
    state: dict[str, Any]
    trial: int
    seed: int


@dataclass(frozen=True)
class WorkerSetup:
    """What every episode of one node shares, sent once through the object store."""

    variant: AgentVariant
    variant_hash: str
    policy: CallPolicy
    prices: PriceTable
    cache: Path | None  # the response cache file, on the worker's node
    key: str  # which node's run this is: its episodes share a runtime on each worker


def connect() -> None:
    """Join the Ray cluster `RAY_ADDRESS` names, or start a local Ray in this process; a Ray
    this process already started (a test, a notebook) is used as it is."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    if ray.is_initialized():
        return
    if os.environ.get("RAY_ADDRESS"):
        ray.init(logging_level=logging.WARNING, log_to_driver=False)
    else:
        ray.init(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)


@dataclass
class _Player:
    """A worker's runtime and agent for one node's episodes (their network clients are made
    once, not per episode)."""

    runtime: SharedRuntime
    agent: Any
    playing: int = 0


class EpisodeWorker:
    """A Ray actor that plays episodes, many at once on its event loop."""

    def __init__(self, folder: str, limits: str):
        import ray

        # Relative paths (scripts, `module:function` entries) mean what they mean to the driver.
        if Path(folder).is_dir():
            os.chdir(folder)
        self.limits = ray.get_actor(limits)
        owner = ray.get_runtime_context().get_actor_id()
        assert owner is not None, "an EpisodeWorker runs only as a Ray actor"
        self.owner = owner
        self.limits.forget.remote(self.owner)  # slots held by an earlier life of this worker
        self.caches: dict[Path, ResponseCache] = {}
        self.players: dict[str, _Player] = {}
        self.domains: dict[str, Any] = {}  # each domain reference resolved once per worker

    async def play(self, episode: Episode, setup: WorkerSetup) -> Transcript:
        from harness.domains import resolve_domain
        from harness.sim.episode import EpisodeSpec, run_episode

        reference = episode.task.domain
        if reference not in self.domains:
            try:
                self.domains[reference] = resolve_domain(reference)
            except Exception:  # the episode resolves it again and reports the environment's error
                self.domains[reference] = None
        player = self._player(setup)
        player.playing += 1
        try:
            spec = EpisodeSpec(
                task=episode.task,
                persona=episode.persona,
                agent=player.agent,
                variant_hash=setup.variant_hash,
                initial_state=episode.state,
                trial=episode.trial,
                seed=episode.seed,
                runtime=player.runtime,
                domain=self.domains[reference],
            )
            return await run_episode(spec)
        finally:
            player.playing -= 1
            await self._retire()

    def _player(self, setup: WorkerSetup) -> _Player:
        from harness.sim.agent import make_agent

        if setup.key not in self.players:
            cache = None
            if setup.cache is not None:
                if setup.cache not in self.caches:
                    self.caches[setup.cache] = ResponseCache(setup.cache)
                cache = self.caches[setup.cache]
            runtime = SharedRuntime(
                cache=cache,
                prices=setup.prices,
                policy=setup.policy,
                limits=self.limits,
                owner=self.owner,
            )
            self.players[setup.key] = _Player(runtime, make_agent(setup.variant, runtime))
        return self.players[setup.key]

    async def _retire(self) -> None:
        """Close the runtimes of the oldest nodes no longer playing, past the newest few."""
        idle = [key for key, player in self.players.items() if not player.playing]
        for key in idle[: max(0, len(self.players) - PLAYERS_KEPT)]:
            await self.players.pop(key).runtime.aclose()


@dataclass
class Pool:
    """The worker actors of this driver and the actor of their shared limits."""

    session: tuple[str, str, str]  # the Ray node and job it was made in, the driver's folder
    workers: list[Any]
    limits: Any


_POOL: list[Pool] = []  # at most one: kept for the process, reused by every node and run


def worker_pool(workers: int | None) -> Pool:
    """The pool of `workers` worker actors (default: one per CPU of the cluster), made on first
    use and reused while Ray runs and the driver stays in its folder, so that a climb's
    evaluations find warm workers."""
    import ray

    connect()
    context = ray.get_runtime_context()
    session = (context.get_node_id(), context.get_job_id(), str(Path.cwd()))
    cpus = int(ray.cluster_resources().get("CPU", 0))
    count = workers or max(cpus, 1)
    if count > cpus:
        message = f"{count} Ray workers asked for, and the Ray cluster has {cpus} CPUs"
        raise SpecError.at(Location("--workers"), "", message)
    if _POOL and _POOL[0].session == session and len(_POOL[0].workers) == count:
        return _POOL[0]
    if _POOL and _POOL[0].session[:2] == session[:2]:  # free the CPUs of the old one
        for actor in [*_POOL[0].workers, _POOL[0].limits]:
            ray.kill(actor)
    _POOL.clear()
    limits = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(EndpointLimits)
    name = f"harness-limits-{uuid.uuid4().hex[:12]}"
    limits_actor = limits.options(name=name, max_concurrency=10_000).remote()
    actor = ray.remote(
        num_cpus=1,
        max_restarts=-1,
        max_task_retries=EPISODE_RETRIES,
        max_concurrency=EPISODES_PER_WORKER_MAX,
    )(EpisodeWorker)  # type: ignore[call-overload]  # ray's overloads omit the actor options
    made = [
        actor.options(scheduling_strategy="SPREAD").remote(str(Path.cwd()), name)
        for _ in range(count)
    ]
    _POOL.append(Pool(session, made, limits_actor))
    return _POOL[0]


class RayExecutor:
    """Episodes as Ray tasks on the pool's workers, `concurrency` at once on each."""

    def __init__(self, workers: int | None = None):
        self.workers = workers

    async def play(self, jobs: Jobs, setup: EpisodeSetup) -> None:
        import asyncio

        import ray

        if not jobs.todo:  # all stored already (a resumed run): no need for Ray
            return
        pool = worker_pool(self.workers)
        runtime = setup.runtime
        shared = ray.put(
            WorkerSetup(
                variant=setup.variant,
                variant_hash=setup.variant_hash,
                policy=runtime.policy,
                prices=runtime.prices,
                cache=runtime.cache.path.resolve() if runtime.cache is not None else None,
                key=uuid.uuid4().hex,
            )
        )

        def on(worker: Any) -> Callable[[EpisodeJob], Awaitable[Transcript]]:
            async def play(job: EpisodeJob) -> Transcript:
                case = job.case
                episode = Episode(
                    task=case.task.model_copy(update={"checks": []}),
                    persona=case.persona_of(job.trial),
                    state=case.state,
                    trial=job.trial,
                    seed=job.seed,
                )
                return await worker.play.remote(episode, shared)

            return play

        # No more slots than episodes, spread over the workers: each slot is a task in memory.
        share = -(-len(jobs.todo) // max(len(pool.workers), 1))
        per_worker = max(min(setup.concurrency, share), 1)
        slots = [on(worker) for worker in pool.workers for _ in range(per_worker)]
        await asyncio.gather(*(drain(jobs, play) for play in slots))

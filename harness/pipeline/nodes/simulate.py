"""`simulate`: play every task's trials against an agent variant and store the transcripts
(`harness.engine.play`), under a run keyed by the node's content: a rerun after a crash finds
that run and plays only the episodes it is missing. Which executor plays them is not part of
the node's key, since it changes nothing in what they give.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from harness.defaults import MAX_CONCURRENCY, MAX_TRIALS
from harness.engine.executors import check_executor
from harness.engine.play import play_run, run_config
from harness.pipeline.nodes import NodeContext, NodeKind, register
from harness.pipeline.types import Episodes, Tasks
from harness.sim.agent import check_agent
from harness.sim.suite import check_variant
from harness.specs.agent import AgentVariant
from harness.specs.base import Spec
from harness.specs.load import Loaded, load_agent
from harness.specs.overrides import Override


class SimulateParams(Spec):
    """Which agent plays, and how often."""

    agent: str = Field(description="Agent variant file.")
    overrides: list[str] = Field(
        default_factory=list, alias="set", description="Variant overrides, `PATH=VALUE`."
    )
    trials: int = Field(
        default=1, ge=1, le=MAX_TRIALS, description="Episodes per task, with distinct seeds."
    )
    first_trial: int = Field(
        default=0,
        ge=0,
        description="Number of the first trial: a run from trial N plays seeds no run from 0 "
        "to N-1 played (fresh seeds for a held-out check).",
    )
    concurrency: int = Field(
        default=8,
        ge=1,
        le=MAX_CONCURRENCY,
        description="Episodes played at once (on each worker, on Ray).",
    )
    executor: Literal["local", "ray"] | None = Field(
        default=None,
        exclude=True,  # not part of the node's key: the episodes are the same wherever played
        description="Where episodes are played: `local` (this process) or `ray` (Ray workers: "
        "the cluster `RAY_ADDRESS` names, else a local Ray). `run-eval --executor` wins; "
        "default local.",
    )


def load_variant(params: SimulateParams) -> Loaded[AgentVariant]:
    """The agent variant the parameters name, checked (`check_agent`); an executor that
    cannot run here is refused with it."""
    if params.executor is not None:
        check_executor(params.executor, "simulate.executor")
    overrides = [Override.parse_in(o, "agent") for o in params.overrides]
    return check_agent(load_agent(Path(params.agent), overrides))


def planned_variant(params: SimulateParams, ctx: NodeContext) -> Loaded[AgentVariant]:
    """The variant loaded when the pipeline was planned (`check=load_variant`)."""
    return ctx.resolved if ctx.resolved is not None else load_variant(params)


def identity(params: SimulateParams, ctx: NodeContext) -> dict[str, Any]:
    """The variant's content hash stands for the agent (not the file's path)."""
    variant_hash = planned_variant(params, ctx).spec.content_hash()
    identity = {"variant_hash": variant_hash, "trials": params.trials}
    return identity | ({"first_trial": params.first_trial} if params.first_trial else {})


async def run(params: SimulateParams, inputs: list[Any], ctx: NodeContext) -> Episodes:
    [tasks] = inputs
    loaded = planned_variant(params, ctx)
    check_variant(loaded, tasks.cases)
    variant = loaded.spec
    config = run_config(
        Path(params.agent),
        params.overrides,
        variant,
        params.trials,
        tasks.source,
        tasks.task_hashes,
    )
    # The run this node's key started before (resumed), else a new one; `--fresh`: a new one.
    engine = ctx.engine
    engine.executor = ctx.executor or params.executor

    def started(run_id: str) -> None:  # `grade` follows the run from here (`NodeKind.follows`)
        planned = Episodes(
            run_id=run_id,
            variant=variant.name,
            variant_hash=variant.content_hash(),
            episodes=len(tasks.cases) * params.trials,
        )
        ctx.announce(planned.with_cases(tasks.cases))

    played = await play_run(
        engine,
        tasks.cases,
        variant,
        config,
        trials=params.trials,
        first_trial=params.first_trial,
        concurrency=params.concurrency,
        key=ctx.key,
        fresh=ctx.fresh,
        label=ctx.node_id,
        started=started,
    )
    return Episodes(
        run_id=played.run_id,
        variant=played.variant,
        variant_hash=played.variant_hash,
        episodes=played.episodes,
    ).with_cases(tasks.cases)


def restore(output: Episodes, inputs: list[Any]) -> Episodes:
    return output.with_cases(inputs[0].cases)


register(
    NodeKind(
        "simulate",
        SimulateParams,
        ((Tasks,),),
        Episodes,
        run,
        identity=identity,
        restore=restore,
        files=("agent",),
        check=load_variant,
    )
)

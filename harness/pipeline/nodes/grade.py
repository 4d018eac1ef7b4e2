"""`grade`: grade a run's stored transcripts with its tasks' checks, as one grading pass named
by the node's key (`harness.engine.grade`); verdicts are stored."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from pydantic import Field

from harness.defaults import MAX_CONCURRENCY
from harness.engine.grade import claim_grading, grade_run, grading_values
from harness.pipeline.nodes import NodeContext, NodeKind, register
from harness.pipeline.types import Episodes, Graded
from harness.specs.agent import ModelRef
from harness.specs.base import Spec


class GradeParams(Spec):
    """How episodes are graded."""

    judge_model: ModelRef | None = Field(
        default=None,
        description="Model of llm_judge checks that name none (default: `--judge-model`, else "
        "the project file's `judge_model`; with none, a pipeline whose tasks need a judge stops "
        "before it plays).",
    )
    concurrency: int = Field(
        default=8, ge=1, le=MAX_CONCURRENCY, description="Episodes graded at once."
    )
    sandbox: Literal["auto", "none"] = Field(
        default="auto",
        description="auto: bubblewrap or Docker, and python checks are refused where neither is "
        "available; none: checker code may run without OS isolation where neither is available "
        "(bubblewrap or Docker are still used when present); every such verdict and the run "
        "summary say so.",
    )


async def run(params: GradeParams, inputs: list[Any], ctx: NodeContext) -> Graded:
    """Grade the run while it is played (the node follows `simulate`: its input is the run
    as announced when it started), then what it stored last."""
    episodes: Episodes = inputs[0]
    engine = ctx.engine
    if params.sandbox == "none":  # this node's own permission, besides --unsafe-checkers
        engine.unsafe_checkers = True
    playing = asyncio.ensure_future(_played(ctx))
    try:
        values = grading_values(params.judge_model)
        if not engine.store.claim_grading(episodes.run_id, ctx.key, values):
            episodes = await playing  # another pass graded the run: its copy takes them all
        run_id = claim_grading(engine, episodes.run_id, params.judge_model, ctx.key)
        attributes = {"variant": episodes.variant, "variant_hash": episodes.variant_hash}
        counts = await grade_run(
            engine,
            run_id,
            episodes.cases,
            params.judge_model,
            ctx.key,
            concurrency=params.concurrency,
            label=ctx.node_id,
            attributes=attributes,
            playing=playing,
            planned=episodes.episodes,
        )
        episodes = await playing
    finally:
        playing.cancel()  # only when grading failed or was interrupted before the run ended
    if run_id != episodes.run_id:
        ctx.store.finish_run(run_id)  # a copy: no simulate node finishes it
    graded = episodes.model_copy(update={"run_id": run_id})  # a copy has the same episodes
    return Graded(**graded.model_dump(), counts=dict(counts)).with_cases(episodes.cases)


async def _played(ctx: NodeContext) -> Episodes:
    """The run once all its episodes are played (`simulate`'s final output)."""
    [episodes] = await ctx.inputs_done()
    assert isinstance(episodes, Episodes)
    return episodes


def restore(output: Graded, inputs: list[Any]) -> Graded:
    return output.with_cases(inputs[0].cases)


register(
    NodeKind("grade", GradeParams, ((Episodes,),), Graded, run, restore=restore, follows=True)
)

"""`grade`: grade a run's stored transcripts with its tasks' checks; verdicts are stored.

A run is graded once: the verdicts a gate, a comparison or a report read under a run id never
change. Grading it again (another judge, changed checks) grades a copy of its episodes under a
new run id (`harness grade RUN_ID` too: `harness.pipeline.stored.regrade`)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from typing import Any, Literal

from pydantic import Field

from harness.defaults import MAX_CONCURRENCY
from harness.grading.checks import CheckContext
from harness.grading.normative import grade
from harness.pipeline.nodes import NodeContext, NodeKind, register
from harness.pipeline.types import Episodes, Graded, Run
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


def claim_run_to_grade(run: Run, judge: ModelRef | None, grading: str, ctx: NodeContext) -> Run:
    """The run a grading pass stores its verdicts under: the given run when the pass is the
    one that grades it (the first, or the same one resumed after a crash), else a copy of its
    episodes under a new run id that records `regraded_from`. The copy is keyed by the pass
    and the run it copies, so that a resumed pass finds it again."""
    values = {"judge_model": judge.model_dump(mode="json") if judge is not None else None}
    if ctx.store.claim_grading(run.run_id, grading, values):
        return run
    copy = ctx.store.copy_run(
        run.run_id,
        {**values, "grading": grading, "regraded_from": run.run_id},
        node_key=f"{grading}/{run.run_id}",
        pipeline_id=ctx.pipeline_id,
    )
    return run.model_copy(update={"run_id": copy}).with_cases(run.cases)


async def grade_run(
    run: Run, judge: ModelRef | None, concurrency: int, grading: str, ctx: NodeContext
) -> Counter[str]:
    """Grade every stored episode of a run (streamed from the store) and store the verdicts.

    The verdicts form one grading pass, named `grading` (the run's own: `claim_run_to_grade`):
    a pass resumed after a crash grades only the episodes it had not graded."""
    cases = {case.task.id: case for case in run.cases}
    graded = ctx.store.graded_keys(run.run_id, grading)
    tracker = ctx.board.track(ctx.node_id, run.episodes)
    for _ in graded:
        tracker.advance()
    episodes = ctx.store.transcripts(run.run_id)
    attributes = {"run_id": run.run_id, "variant": run.variant, "variant_hash": run.variant_hash}

    async def worker() -> None:
        for transcript, trace_id, call_id in episodes:  # a shared iterator: each item once
            case = cases.get(transcript.task_id)
            if case is None or (transcript.task_id, transcript.trial) in graded:
                continue  # a task no longer in the set, or graded before a crash
            parent = ctx.tracer.reference(trace_id, call_id)
            span_attributes = {**attributes, "task_id": case.task.id, "trial": transcript.trial}
            with ctx.tracer.span(
                "harness.grade", {"task_id": case.task.id}, span_attributes, parent=parent
            ) as span:
                context = CheckContext(case.task, ctx.runtime, judge, ctx.unsafe_checkers)
                verdict = await grade(transcript, context)
                if span is not None:
                    span.output = verdict
            ctx.store.add_verdict(run.run_id, verdict, grading)
            passed = None if verdict.outcome == "error" else verdict.outcome == "pass"
            tracker.advance(passed=passed, error=verdict.outcome == "error")

    # No more workers than episodes: each is a task held in memory while it waits.
    await asyncio.gather(*(worker() for _ in range(max(min(concurrency, run.episodes), 1))))
    return Counter(ctx.store.grading_counts(run.run_id, grading))


async def run(params: GradeParams, inputs: list[Any], ctx: NodeContext) -> Graded:
    [episodes] = inputs
    if params.sandbox == "none":  # this node's own permission, besides --unsafe-checkers
        ctx = dataclasses.replace(ctx, unsafe_checkers=True)
    graded = claim_run_to_grade(episodes, params.judge_model, ctx.key, ctx)
    counts = await grade_run(graded, params.judge_model, params.concurrency, ctx.key, ctx)
    if graded.run_id != episodes.run_id:
        ctx.store.finish_run(graded.run_id)  # a copy: no simulate node finishes it
    return Graded(**graded.model_dump(), counts=dict(counts)).with_cases(graded.cases)


def restore(output: Graded, inputs: list[Any]) -> Graded:
    return output.with_cases(inputs[0].cases)


register(NodeKind("grade", GradeParams, ((Episodes,),), Graded, run, restore=restore))

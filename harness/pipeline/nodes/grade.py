"""`grade`: grade a run's stored transcripts with its tasks' checks; verdicts are stored."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from pydantic import Field

from harness.defaults import JUDGE_MODEL
from harness.grading.checks import CheckContext
from harness.grading.normative import grade
from harness.pipeline.nodes import NodeContext, NodeKind, register
from harness.pipeline.types import Episodes, Graded, Run
from harness.specs.agent import ModelRef
from harness.specs.base import Spec
from harness.store import new_id


class GradeParams(Spec):
    """How episodes are graded."""

    judge_model: ModelRef = Field(
        default_factory=lambda: ModelRef(id=JUDGE_MODEL),
        description="Model of llm_judge checks that name none.",
    )
    concurrency: int = Field(default=8, ge=1, description="Episodes graded at once.")


async def grade_run(run: Run, judge: ModelRef, concurrency: int, ctx: NodeContext) -> Counter[str]:
    """Grade every stored episode of a run (streamed from the store) and store the verdicts.

    The verdicts form one grading pass, named by the node's key: a pass resumed after a crash
    grades only the episodes it had not graded. Without a key (`harness grade`), a new pass."""
    cases = {case.task.id: case for case in run.cases}
    grading = ctx.key or new_id("grade-")
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
                verdict = await grade(transcript, CheckContext(case.task, ctx.runtime, judge))
                if span is not None:
                    span.output = verdict
            ctx.store.add_verdict(run.run_id, verdict, grading)
            passed = None if verdict.outcome == "error" else verdict.outcome == "pass"
            tracker.advance(passed=passed, error=verdict.outcome == "error")

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return Counter(ctx.store.grading_counts(run.run_id, grading))


async def run(params: GradeParams, inputs: list[Any], ctx: NodeContext) -> Graded:
    [episodes] = inputs
    ctx.store.update_run_config(
        episodes.run_id, {"judge_model": params.judge_model.model_dump(mode="json")}
    )
    counts = await grade_run(episodes, params.judge_model, params.concurrency, ctx)
    return Graded(**episodes.model_dump(), counts=dict(counts)).with_cases(episodes.cases)


def restore(output: Graded, inputs: list[Any]) -> Graded:
    return output.with_cases(inputs[0].cases)


register(NodeKind("grade", GradeParams, ((Episodes,),), Graded, run, restore=restore))

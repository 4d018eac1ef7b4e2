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


class GradeParams(Spec):
    """How episodes are graded."""

    judge_model: ModelRef = Field(
        default_factory=lambda: ModelRef(id=JUDGE_MODEL),
        description="Model of llm_judge checks that name none.",
    )
    concurrency: int = Field(default=8, ge=1, description="Episodes graded at once.")


async def grade_run(run: Run, judge: ModelRef, concurrency: int, ctx: NodeContext) -> Counter[str]:
    """Grade every stored episode of a run (streamed from the store) and store the verdicts."""
    cases = {case.task.id: case for case in run.cases}
    tracker = ctx.board.track(ctx.node_id, run.episodes)
    counts: Counter[str] = Counter()
    episodes = ctx.store.transcripts(run.run_id)
    attributes = {"run_id": run.run_id, "variant": run.variant, "variant_hash": run.variant_hash}

    async def worker() -> None:
        for transcript, trace_id, call_id in episodes:  # a shared iterator: each item once
            case = cases.get(transcript.task_id)
            if case is None:  # a task no longer in the set
                continue
            parent = ctx.tracer.reference(trace_id, call_id)
            span_attributes = {**attributes, "task_id": case.task.id, "trial": transcript.trial}
            with ctx.tracer.span(
                "harness.grade", {"task_id": case.task.id}, span_attributes, parent=parent
            ) as span:
                verdict = await grade(transcript, CheckContext(case.task, ctx.runtime, judge))
                if span is not None:
                    span.output = verdict
            ctx.store.add_verdict(run.run_id, verdict)
            counts[verdict.outcome] += 1
            passed = None if verdict.outcome == "error" else verdict.outcome == "pass"
            tracker.advance(passed=passed, error=verdict.outcome == "error")

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return counts


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

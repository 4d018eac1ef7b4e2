"""`compare`: variant B (second need) against variant A (first need) on the same tasks."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from harness import defaults
from harness.compare import compare_runs
from harness.pipeline.nodes import NodeContext, NodeKind, register
from harness.pipeline.types import Comparison, Graded
from harness.specs.agent import ModelRef
from harness.specs.base import Spec


class CompareParams(Spec):
    """Optional relative judging on top of the paired statistics."""

    judge_model: ModelRef | None = Field(
        default=None,
        description="When given, a pairwise judge also says which transcript of each task and "
        "trial is better (asked in both orders), and the comparison gains a win rate.",
    )
    max_error_rate: float = Field(
        default=defaults.MAX_ERROR_RATE,
        ge=0,
        le=1,
        description="Most share of either run's episodes without evidence: above it the "
        "verdict is 'undecided: errors' (the gate's ceiling, applied to comparisons).",
    )


async def run(params: CompareParams, inputs: list[Any], ctx: NodeContext) -> Comparison:
    a, b = inputs
    judge = None
    if params.judge_model is not None:
        judge = ctx.runtime.model(params.judge_model, role="judge")
    result = await compare_runs(
        ctx.store, a.run_id, b.run_id, b.cases, judge, params.max_error_rate
    )
    return Comparison(a=a, b=b, result=result)


register(NodeKind("compare", CompareParams, ((Graded,), (Graded,)), Comparison, run))

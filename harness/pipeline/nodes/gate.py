"""`gate`: apply the regression gate to a candidate (last need) against a baseline (first need
when two are given, otherwise the stored baseline of the variant's name, if any)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from harness.defaults import GATE_CONFIG
from harness.gate import gate_run, load_gate_config
from harness.pipeline.nodes import NodeContext, NodeKind, file_digest, register
from harness.pipeline.types import GateDecision, Graded
from harness.specs.base import Spec


class GateParams(Spec):
    """Which thresholds apply."""

    config: str = Field(default=str(GATE_CONFIG), description="The gate's thresholds file.")


async def run(params: GateParams, inputs: list[Any], ctx: NodeContext) -> GateDecision:
    *base, candidate = inputs
    baseline_run = base[0].run_id if base else ctx.store.baseline()
    config = load_gate_config(params.config)
    result = gate_run(ctx.store, config, candidate.run_id, baseline_run, candidate.cases)
    return GateDecision(candidate=candidate, result=result)


def identity(params: GateParams, ctx: NodeContext) -> dict[str, Any]:
    return {"config": file_digest(params.config), "baseline": ctx.store.baseline()}


register(
    NodeKind(
        "gate",
        GateParams,
        ((Graded,), (Graded,)),
        GateDecision,
        run,
        optional=1,
        identity=identity,
        files=("config",),
        check=lambda params: load_gate_config(params.config),
    )
)

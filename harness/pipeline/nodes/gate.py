"""`gate`: apply the regression gate to a candidate (last need) against a baseline (first need
when two are given, otherwise the stored baseline of the variant's name, if any)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from harness.gate import gate_run
from harness.pipeline.nodes import NodeContext, NodeKind, file_digest, register
from harness.pipeline.types import GateDecision, Graded
from harness.specs.base import Spec
from harness.specs.gate import Gate
from harness.specs.load import load_spec


class GateParams(Spec):
    """Which thresholds apply."""

    config: str = Field(default="ci/gate.yaml", description="The gate's thresholds file.")


def load_gate(path: str) -> Gate:
    spec = load_spec(Path(path)).spec
    assert isinstance(spec, Gate)
    return spec


async def run(params: GateParams, inputs: list[Any], ctx: NodeContext) -> GateDecision:
    *base, candidate = inputs
    baseline_run = base[0].run_id if base else ctx.store.baseline()
    result = gate_run(
        ctx.store, load_gate(params.config), candidate.run_id, baseline_run, candidate.cases
    )
    return GateDecision(
        passed=result.passed,
        reasons=result.reasons,
        candidate=candidate,
        baseline_run=baseline_run,
        result={"details": result.details, "failing_tasks": result.failing_tasks},
    )


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
        check=lambda params: load_gate(params.config),
    )
)

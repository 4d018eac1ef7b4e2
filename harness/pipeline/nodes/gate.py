"""`gate`: apply the regression gate to a candidate (last need) against a baseline (first need
when two are given, otherwise the stored baseline of the candidate's suite, if any), after
playing the evidence it needs with the two runs' variants (`harness.gate.play`)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from harness.defaults import GATE_CONFIG
from harness.gate import load_gate_config
from harness.gate.play import gate_async
from harness.gate.suites import baseline_for
from harness.pipeline.nodes import NodeContext, NodeKind, file_digest, register
from harness.pipeline.types import GateDecision, Graded
from harness.specs.base import Spec


class GateParams(Spec):
    """Which thresholds apply."""

    config: str = Field(default=str(GATE_CONFIG), description="The gate's thresholds file.")
    allow_suite_change: bool = Field(
        default=False,
        description="Compare with a baseline of another suite (task ids and contents) on the "
        "tasks both played; otherwise runs of different suites are refused.",
    )
    play: bool = Field(
        default=True,
        description="Play the evidence the gate needs before deciding (more trials of declined "
        "regression tasks, replays of episodes without evidence), up to the gate file's "
        "`max_trials`; false: decide on the runs as they are, UNDECIDED where they cannot.",
    )


async def run(params: GateParams, inputs: list[Any], ctx: NodeContext) -> GateDecision:
    *base, candidate = inputs
    config = load_gate_config(params.config)
    if base:
        baseline_run, notes = base[0].run_id, [f"baseline {base[0].run_id}: the first need"]
    else:
        info = ctx.store.run(candidate.run_id)
        assert info is not None  # the candidate's node stored it
        baseline_run, note = baseline_for(ctx.store, info, params.allow_suite_change)
        notes = [note]
    result = await gate_async(
        ctx.engine,
        config,
        candidate.run_id,
        baseline_run,
        candidate.cases,
        allow_suite_change=params.allow_suite_change,
        notes=notes,
        play=params.play,
    )
    return GateDecision(candidate=candidate, result=result)


def identity(params: GateParams, ctx: NodeContext) -> dict[str, Any]:
    return {"config": file_digest(params.config), "baselines": ctx.store.baselines()}


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

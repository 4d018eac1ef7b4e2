"""`log_wandb`: log the pipeline to a W&B run: the resolved configuration (with the variants'
hashes), summary metrics per run, a per-task table, comparisons and gate decisions.

Offline by default (a run directory under `dir`, synced later with `wandb sync`); online when
`mode: online` or `WANDB_MODE=online` and the user is logged in. wandb never starts weave here
(`WANDB_DISABLE_WEAVE=true`): the harness traces with its own client.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import Field

from harness.defaults import STATE_DIR
from harness.pipeline.nodes import NodeContext, NodeKind, register
from harness.pipeline.types import Comparison, GateDecision, Graded, WandbRun
from harness.report.summary import run_figures
from harness.specs.base import Spec


class LogWandbParams(Spec):
    """Where the W&B run goes."""

    project: str = Field(default="harness", description="W&B project.")
    entity: str | None = Field(default=None, description="W&B entity (team or user).")
    mode: Literal["offline", "online", "disabled"] | None = Field(
        default=None, description="Default: $WANDB_MODE, else offline."
    )
    dir: str = Field(
        default=str(STATE_DIR), description="Where the local run directory is written."
    )


def metrics(store: Any, inputs: list[Any]) -> tuple[dict[str, Any], list[list[Any]]]:
    """Summary metrics (prefixed by variant) and per-task table rows."""
    summary: dict[str, Any] = {}
    rows: list[list[Any]] = []
    for item in inputs:
        if isinstance(item, Graded):
            figures = run_figures(store, item.run_id, item.levels)
            prefix = item.variant
            summary.update(
                {
                    f"{prefix}/pass_rate": figures.rate,
                    f"{prefix}/pass_rate_low": figures.low,
                    f"{prefix}/pass_rate_high": figures.high,
                    f"{prefix}/passed": figures.passed,
                    f"{prefix}/graded": figures.graded,
                    f"{prefix}/errors": sum(figures.errors_by_side.values()),
                    f"{prefix}/cost_usd": figures.usage.cost_usd + figures.user_usage.cost_usd,
                    f"{prefix}/variant_hash": item.variant_hash,
                }
            )
            rows += [
                [
                    item.variant,
                    item.run_id,
                    line.task_id,
                    line.level,
                    line.passed,
                    line.trials,
                    ", ".join(line.failed_checks),
                ]
                for line in figures.tasks
            ]
        elif isinstance(item, Comparison):
            summary.update(
                {
                    "compare/difference": item.result.tasks.difference,
                    "compare/difference_low": item.result.tasks.low,
                    "compare/difference_high": item.result.tasks.high,
                    "compare/p_value": item.result.tasks.p_value,
                    "compare/mcnemar_p": item.result.mcnemar.p_value,
                }
            )
        elif isinstance(item, GateDecision):
            gate = item.result
            summary.update({"gate/passed": int(gate.passed), "gate/reasons": len(gate.reasons)})
    return summary, rows


async def run(params: LogWandbParams, inputs: list[Any], ctx: NodeContext) -> WandbRun:
    os.environ.setdefault("WANDB_DISABLE_WEAVE", "true")
    os.environ.setdefault("WANDB_ERROR_REPORTING", "false")
    import wandb

    mode = params.mode or os.environ.get("WANDB_MODE") or "offline"
    if mode == "dryrun":
        mode = "offline"
    os.makedirs(params.dir, exist_ok=True)
    summary, rows = metrics(ctx.store, inputs)
    run = wandb.init(
        project=params.project,
        entity=params.entity,
        mode=mode,
        dir=params.dir,
        name=ctx.pipeline_id,
        job_type="eval",
        config=ctx.config,
        settings=wandb.Settings(
            console="off", silent=True, x_disable_stats=True, x_disable_machine_info=True
        ),
    )
    try:
        run.log(summary)
        run.summary.update(summary)
        if rows:
            columns = ["variant", "run", "task", "level", "passed", "trials", "failed checks"]
            run.log({"tasks": wandb.Table(columns=columns, data=rows)})
    finally:
        run.finish()
    directory = None if mode == "disabled" else os.path.dirname(run.dir)
    return WandbRun(run_id=run.id, mode=mode, directory=directory)


register(
    NodeKind(
        "log_wandb",
        LogWandbParams,
        ((Graded, Comparison, GateDecision),),
        WandbRun,
        run,
        variadic=True,
    )
)

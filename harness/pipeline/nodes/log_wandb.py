"""`log_wandb`: log the pipeline to a W&B run: the resolved configuration (with the variants'
hashes), summary metrics per run, a per-task table, comparisons and gate decisions.

Offline by default (a run directory under `dir`, synced later with `wandb sync`); online when
`mode: online` or `WANDB_MODE=online` and the user is logged in. wandb never starts weave here
(`WANDB_DISABLE_WEAVE=true`): the harness traces with its own client.
"""

from __future__ import annotations

import atexit
import json
import os
import random
import string
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness.pipeline.nodes import NodeContext, NodeKind, register
from harness.pipeline.types import Comparison, GateDecision, Graded, WandbRun
from harness.report.summary import run_figures
from harness.secrets import redact
from harness.specs.wandb import WandbTarget


class LogWandbParams(WandbTarget):
    """Where the W&B run goes."""


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
                    f"{prefix}/episodes": figures.episodes,
                    f"{prefix}/errors": figures.errors,
                    f"{prefix}/too_many_errors": int(figures.too_many_errors),
                    f"{prefix}/cost_usd": figures.cost_usd,  # agent, user and judge together
                    f"{prefix}/agent_cost_usd": figures.usage.cost_usd,
                    f"{prefix}/user_cost_usd": figures.user_usage.cost_usd,
                    f"{prefix}/judge_cost_usd": figures.judge_usage.cost_usd,
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
            summary.update(
                {
                    "gate/passed": int(gate.passed),
                    "gate/status": gate.status,
                    "gate/reasons": len(gate.reasons),
                    "gate/undecided": len(gate.undecided),
                }
            )
    return summary, rows


def start_wandb_run(
    target: WandbTarget, name: str, job_type: str, config: dict[str, Any], run_id: str | None = None
) -> Any:
    """A W&B run in the target's mode (offline unless told otherwise); wandb never starts weave
    and reports no errors of its own."""
    os.environ.setdefault("WANDB_DISABLE_WEAVE", "true")
    os.environ.setdefault("WANDB_ERROR_REPORTING", "false")
    import wandb

    mode = target.resolved_mode()
    os.makedirs(target.dir, exist_ok=True)
    return wandb.init(
        project=target.project,
        entity=target.entity,
        mode=mode,  # type: ignore[arg-type]  # $WANDB_MODE's text as is: wandb checks it
        dir=target.dir,
        name=name,
        id=run_id,
        job_type=job_type,
        config=config,
        settings=wandb.Settings(
            console="off", silent=True, x_disable_stats=True, x_disable_machine_info=True
        ),
    )


def finished(run: Any) -> WandbRun:
    """Finish a W&B run; where it went."""
    run.finish()
    directory = None if run.disabled else os.path.dirname(run.dir)
    mode = "disabled" if run.disabled else run.settings.mode
    return WandbRun(
        run_id=run.id, mode="offline" if mode == "dryrun" else mode, directory=directory
    )


async def run(params: LogWandbParams, inputs: list[Any], ctx: NodeContext) -> WandbRun:
    """The metrics are read from the store here; the W&B run is written by a child process
    (importing wandb and starting its service take about a second and a half), which this
    process waits for only as it exits, after the summary is printed."""
    mode = params.resolved_mode()
    if mode == "disabled":
        return WandbRun(run_id="", mode=mode, directory=None)
    summary, rows = metrics(ctx.store, inputs)
    run_id = "".join(random.choices(string.ascii_lowercase + string.digits, k=8))
    os.makedirs(params.dir, exist_ok=True)
    payload = {
        "target": params.model_dump(mode="json"),
        "run_id": run_id,
        "name": ctx.pipeline_id,
        "config": ctx.config,
        "summary": summary,
        "rows": rows,
    }
    with tempfile.NamedTemporaryFile(
        "w", dir=params.dir, prefix="wandb-", suffix=".json", delete=False
    ) as out:
        out.write(redact(json.dumps(payload, default=str)))
    code = f"import sys; from {__name__} import write_run; write_run(sys.argv[1])"
    child = subprocess.Popen([sys.executable, "-c", code, out.name], stdout=subprocess.DEVNULL)
    if not _CHILDREN:
        atexit.register(_wait_for_children)
    _CHILDREN.append(child)
    return WandbRun(run_id=run_id, mode=mode, directory=os.path.join(params.dir, "wandb"))


_CHILDREN: list[subprocess.Popen[bytes]] = []


def _wait_for_children() -> None:
    for child in _CHILDREN:
        child.wait()


def write_run(payload_file: str) -> None:
    """In the child: the W&B run of a payload the node wrote (then the payload is removed)."""
    import wandb

    payload = json.loads(Path(payload_file).read_text())
    Path(payload_file).unlink()
    target = WandbTarget.model_validate(payload["target"])
    run = start_wandb_run(target, payload["name"], "eval", payload["config"], payload["run_id"])
    try:
        run.log(payload["summary"])
        run.summary.update(payload["summary"])
        if payload["rows"]:
            columns: list[str | int] = [
                "variant",
                "run",
                "task",
                "level",
                "passed",
                "trials",
                "failed checks",
            ]
            run.log({"tasks": wandb.Table(columns=columns, data=payload["rows"])})
    finally:
        run.finish()


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

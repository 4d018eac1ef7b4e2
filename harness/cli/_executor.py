"""The options that choose where episodes are played, shared by `run-eval` and `climb`, checked
by the rules `harness.evaluate` checks its `executor` and `workers` with (`EvalOptions`)."""

from __future__ import annotations

from typing import Annotated

import typer

from harness.cli._common import option_check

ExecutorOpt = Annotated[
    str | None,
    typer.Option(
        "--executor",
        metavar="[local|ray]",
        callback=option_check("EvalOptions", "executor", "--executor"),
        help="Where episodes are played: local (this process) or ray (Ray workers: the cluster "
        "$RAY_ADDRESS names, else a local Ray). Default: each simulate node's `executor`, "
        "else local.",
    ),
]
WorkersOpt = Annotated[
    int | None,
    typer.Option(
        callback=option_check("EvalOptions", "workers", "--workers"),
        help="With --executor ray: workers (default: one per CPU of the cluster).",
    ),
]


def executor_name(executor: str | None) -> str | None:
    return executor

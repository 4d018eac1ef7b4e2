"""The options that choose where episodes are played, shared by `run-eval` and `climb`."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer


class ExecutorName(StrEnum):
    LOCAL = "local"
    RAY = "ray"


ExecutorOpt = Annotated[
    ExecutorName | None,
    typer.Option(
        "--executor",
        help="Where episodes are played: local (this process) or ray (Ray workers: the cluster "
        "$RAY_ADDRESS names, else a local Ray). Default: each simulate node's `executor`, "
        "else local.",
    ),
]
WorkersOpt = Annotated[
    int | None,
    typer.Option(min=1, help="With --executor ray: workers (default: one per CPU of the cluster)."),
]


def executor_name(executor: ExecutorName | None) -> str | None:
    return executor.value if executor is not None else None

"""`harness export`: a stored run's episodes, one row each, as JSON lines or CSV."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from harness import defaults
from harness.cli._common import StoreOpt, user_errors


class Format(StrEnum):
    """The formats `harness export` writes."""

    JSONL = "jsonl"
    CSV = "csv"


def export(
    run_id: Annotated[
        str, typer.Argument(help="A run id, or a pipeline id (dag-...) for all its runs.")
    ],
    format_: Annotated[Format, typer.Option("--format", help="jsonl or csv.")] = Format.JSONL,
    out: Annotated[Path | None, typer.Option(help="Write here instead of stdout.")] = None,
    store: StoreOpt = defaults.RESULTS_STORE,  # type: ignore[assignment]  # typer parses it
) -> None:
    """Write a stored run's episodes, one row each, as JSON lines or CSV.

    Each row: run, task, trial, seed, variant, verdict (pass, fail, error or ungraded), score,
    end reason, error side, failed checks, turns, time, the agent's and the simulated user's
    tokens, and cost. To stdout unless --out."""
    from harness.api.stored import export_stored

    with user_errors():
        count = export_stored(store, run_id, format_.value, out)
    if out is not None:
        typer.echo(f"wrote {count} episodes to {out}")

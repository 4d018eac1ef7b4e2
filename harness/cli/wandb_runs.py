"""`harness wandb-flush`: finish the W&B runs a pipeline's detached writer is still writing (or
left unwritten when it died), before `wandb sync` uploads the folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli._common import EXIT_HARNESS, echo_error
from harness.defaults import STATE_DIR


def wandb_flush(
    folder: Annotated[
        Path, typer.Argument(help="The folder a log_wandb node writes to (its `dir`).")
    ] = STATE_DIR,
    timeout: Annotated[
        float, typer.Option(min=0, help="Seconds to wait for runs being written.")
    ] = 120.0,
) -> None:
    """Finish the W&B runs still pending in a folder: a pipeline's run is written by a detached
    process after the command returns (run this before `wandb sync`). A run whose writer died is
    written here, once. Exit 3 when a run cannot be written, or is still being written after
    --timeout."""
    from harness.api.pipeline import finish_wandb_runs

    done = finish_wandb_runs(folder, timeout)
    for run_id in done.written:
        typer.echo(f"wrote W&B run {run_id} (its writer had died)")
    for run_id, why in done.failed.items():
        echo_error(f"harness: W&B run {run_id} could not be written (it stays pending): {why}")
    if done.pending:
        echo_error(
            f"harness: {folder}: {len(done.pending)} W&B run(s) still being written after "
            f"{timeout:g} s: {', '.join(done.pending)} (see {folder / 'wandb-writer.log'})"
        )
    if done.failed or done.pending:
        raise typer.Exit(EXIT_HARNESS)
    typer.echo(f"{folder}: every W&B run is written")

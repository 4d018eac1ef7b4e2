"""`harness tau2 ...`: the plug-in's commands (entry point `harness.commands: tau2`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="tau2-bench through harness.", no_args_is_help=True)


@app.command("import")
def import_tasks(
    domain: Annotated[str, typer.Option(help="tau2 domain: airline or retail.")],
    out: Annotated[Path, typer.Option(help="Folder to write the tasks into.")],
    split: Annotated[
        str, typer.Option(help="tau2's task split (base, train, test), or 'all'.")
    ] = "base",
    user_model: Annotated[
        str, typer.Option(help="Model of the simulated user (the tau2-user persona).")
    ] = "openai/gpt-4.1",
) -> None:
    """Write tau2's tasks of a domain as harness tasks: a task file per task, the tau2-user
    persona (personas/), and tau2's start database (db.json) the tasks share."""
    from harness_tau2.export import BadTasks, write_tasks

    try:
        written, skipped = write_tasks(domain, out, None if split == "all" else split, user_model)
    except (KeyError, BadTasks) as exc:
        message = str(exc.args[0]).replace("\r", "\\r").replace("\n", "\\n")
        typer.echo(f"harness tau2 import: {message}", err=True)
        raise SystemExit(2) from None
    for problem in skipped:
        typer.echo(f"skipped: {problem}", err=True)
    typer.echo(f"{written} tasks written to {out} ({len(skipped)} skipped)")

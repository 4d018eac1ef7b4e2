"""`harness init DIR`: scaffold a working project for a new domain."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli._common import fail


def init(
    directory: Annotated[Path, typer.Argument(help="A new (or empty) folder for the project.")],
) -> None:
    """Create a project: a domain with two tools and a state model, six tasks, a persona, a
    baseline agent and a variant, a gate config and a DAG, ready to run offline."""
    from harness.scaffold import TargetNotEmpty, create_project

    try:
        files = create_project(directory)
    except TargetNotEmpty as exc:
        fail(f"harness init: {exc}")
    for path in files:
        typer.echo(f"made {path}")
    typer.echo(
        f"\nnext: cd {directory} && harness run-eval --tasks tasks --agent agents/baseline.yaml"
    )

"""`harness validate` and `harness schema`: check spec files, and print their JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from harness.cli._common import user_errors


def validate(
    paths: Annotated[list[Path], typer.Argument(help="Spec files or folders to validate.")],
) -> None:
    """Validate task, persona, agent, DAG, gate and script files (kind from `kind:`)."""
    from harness.pipeline.check import check_file
    from harness.specs.located import SpecError
    from harness.specs.references import spec_files

    problems = []
    with user_errors():
        files = spec_files(paths)
    for path in files:
        try:
            kind = check_file(path)
        except SpecError as exc:
            problems.extend(exc.problems)
            continue
        typer.echo(f"ok  {kind:<8} {path}")
    for problem in problems:
        typer.echo(str(problem), err=True)
    failed = len({p.location.source for p in problems})
    typer.echo(f"{len(files) - failed} valid, {failed} invalid", err=bool(problems))
    if problems:
        raise typer.Exit(2)


def schema(
    kind: Annotated[
        str,
        typer.Argument(help="task, persona, agent, dag, gate, script; or domain (the Python API)."),
    ],
) -> None:
    """Print the JSON Schema of a file kind, for editor autocompletion; `domain` prints the guide
    to the Python API a domain and a python agent are written against."""
    from harness.domains.replay import ReplayState
    from harness.specs.schema import json_schema

    if kind == "domain":
        from harness.domains.describe import api_guide

        typer.echo(api_guide())
        return
    with user_errors():
        typer.echo(json.dumps(json_schema(kind, {"replay": ReplayState}), indent=2))

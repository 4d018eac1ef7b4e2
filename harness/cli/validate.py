"""`harness validate` and `harness schema`: check spec files, and print their JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from harness.cli._common import fail, user_errors


def validate(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Spec files or folders to validate (default: the working folder)."),
    ] = None,
) -> None:
    """Validate task, persona, agent, DAG, gate and script files (kind from `kind:`); the task
    files given must have distinct ids, as one suite's must. With no path, every spec of the
    working folder (hidden folders and the project file passed over)."""
    paths = paths or [Path(".")]
    from harness.api.pipeline import check_file
    from harness.project import use_project_of
    from harness.sim.suite import duplicate_id, load_cases
    from harness.specs.load import Loaded
    from harness.specs.located import Problem, SpecError
    from harness.specs.references import spec_files
    from harness.specs.task import Task

    problems: list[Problem] = []
    invalid = 0
    tasks: dict[str, Loaded[Task]] = {}
    with user_errors():
        use_project_of(paths[0] if paths else None)
        files = spec_files(paths)
    for path in files:
        try:
            kind = check_file(path)
            if kind == "task":
                [case] = load_cases([path])  # built once per command: check_file built it
                first = tasks.setdefault(case.task.id, case.loaded)
                if first is not case.loaded:
                    raise SpecError([duplicate_id(case.loaded, first)])
        except SpecError as exc:
            problems.extend(exc.problems)
            invalid += 1
            continue
        typer.echo(f"ok  {kind:<8} {path}")
    for problem in dict.fromkeys(problems):  # a file many tasks share: its problem once
        typer.echo(str(problem), err=True)
    typer.echo(f"{len(files) - invalid} valid, {invalid} invalid", err=bool(problems))
    if problems:
        raise typer.Exit(2)


SCHEMA_EXTRAS = ("check-input", "domain")  # what `schema` prints besides the spec file kinds


def schema(
    kind: Annotated[
        str,
        typer.Argument(
            help="task, persona, agent, dag, gate, script, climb; check-input (what a python "
            "check receives); or domain (the Python API)."
        ),
    ],
) -> None:
    """Print the JSON Schema of a file kind, for editor autocompletion; `check-input` prints the
    JSON Schema of the transcript a `python` check receives, with the call signatures
    (`check(transcript)`, `check_following(instruction, response)`) as its description;
    `domain` prints the guide to the Python API a domain and a python agent are written
    against."""
    from harness.domains.replay import ReplayState
    from harness.specs.kinds import KINDS
    from harness.specs.schema import json_schema

    if kind not in KINDS and kind not in SCHEMA_EXTRAS:
        known = ", ".join([*KINDS, *SCHEMA_EXTRAS])
        fail(f"schema: unknown kind '{kind}'; expected one of: {known}")
    if kind == "domain":
        from harness.domains.describe import api_guide

        typer.echo(api_guide())
        return
    if kind == "check-input":
        from harness.grading.checks.python import check_input_schema

        typer.echo(json.dumps(check_input_schema(), indent=2))
        return
    with user_errors():
        typer.echo(json.dumps(json_schema(kind, {"replay": ReplayState}), indent=2))

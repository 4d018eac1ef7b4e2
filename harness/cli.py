"""The `harness` command line. Only this module knows about the command line; heavy modules are
imported inside the commands so that `harness --help` stays fast."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from harness.specs.load import Override

app = typer.Typer(
    help="Evaluate LLM agents on YAML tasks with simulated users, graders and a CI gate.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

OVERRIDE_SCOPES = ("agent", "task")


@contextmanager
def user_errors() -> Iterator[None]:
    """Print located input errors one per line on stderr and exit with 2, without a traceback."""
    from harness.specs.load import SpecError

    try:
        yield
    except SpecError as exc:
        for problem in exc.problems:
            typer.echo(str(problem), err=True)
        raise typer.Exit(2) from None


def split_overrides(texts: list[str]) -> dict[str, list[Override]]:
    """Route `--set agent.x=1` and `--set task.y=2` to the specs they patch."""
    from harness.specs.load import Location, Override, SpecError

    routed: dict[str, list[Override]] = {scope: [] for scope in OVERRIDE_SCOPES}
    for text in texts:
        scope, override = Override.parse(text).scoped()
        if scope not in routed or not override.keys:
            expected = " or ".join(f"{s}.FIELD=VALUE" for s in OVERRIDE_SCOPES)
            raise SpecError.at(Location(f"--set {text}"), "", f"expected {expected}")
        routed[str(scope)].append(override)
    return routed


@app.command("run-eval")
def run_eval(
    tasks: Annotated[list[Path], typer.Option("--tasks", help="Task files or folders.")],
    agent: Annotated[Path, typer.Option("--agent", help="Agent variant file.")],
    personas: Annotated[
        Path | None, typer.Option(help="Personas folder (default: nearest personas/ folder).")
    ] = None,
    store: Annotated[Path, typer.Option(help="SQLite results file.")] = Path(".harness/results.db"),
    trials: Annotated[int, typer.Option(min=1, help="Episodes per task.")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, help="Episodes run at once.")] = 8,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override a field: agent.PATH=VALUE or task.PATH=VALUE."),
    ] = None,
) -> None:
    """Run every task as a simulated episode against an agent variant and print a summary."""
    import asyncio

    from harness.evaluate import evaluate
    from harness.report.terminal import print_summary
    from harness.sim.suite import check_variant, load_suite
    from harness.specs.load import load_agent
    from harness.store import Store

    with user_errors():
        routed = split_overrides(set_ or [])
        variant = load_agent(agent, routed["agent"])
        cases = load_suite(tasks, personas, routed["task"])
        check_variant(variant, cases)
    config = {
        "tasks": [str(p) for p in tasks],
        "agent": str(agent),
        "overrides": set_ or [],
        "trials": trials,
        "variant": variant.spec.model_dump(mode="json"),
    }
    results = Store(store)
    try:
        summary = asyncio.run(
            evaluate(
                cases, variant.spec, results, trials=trials, concurrency=concurrency, config=config
            )
        )
    finally:
        results.close()
    print_summary(summary, str(store))


@app.command()
def validate(
    paths: Annotated[list[Path], typer.Argument(help="Spec files or folders to validate.")],
) -> None:
    """Validate task, persona, agent, DAG, gate and script files (kind from `kind:`)."""
    from harness.sim.suite import load_suite
    from harness.specs.load import SpecError, kind_of, load_spec, read_mapping, spec_files

    problems = []
    with user_errors():
        files = spec_files(paths)
    for path in files:
        try:
            data, positions = read_mapping(path)
            kind = kind_of(path, data, positions)
            if kind == "task":
                load_suite([path])
            else:
                load_spec(path)
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


@app.command()
def schema(
    kind: Annotated[str, typer.Argument(help="task, persona, agent, dag, gate or script.")],
) -> None:
    """Print the JSON Schema of a file kind, for editor autocompletion."""
    from harness.specs.load import json_schema

    with user_errors():
        typer.echo(json.dumps(json_schema(kind), indent=2))


def main() -> None:
    """Entry point of the `harness` command."""
    app(prog_name="harness")


if __name__ == "__main__":
    main()

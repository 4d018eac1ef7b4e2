"""What the commands share: option types, bad input printed as one line per problem, model
options, and the printing of a finished pipeline."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from harness.imports import UnresolvedReference
from harness.project import ProjectError
from harness.registry import DuplicateEntry

if TYPE_CHECKING:
    from harness.pipeline.runner import Outcome

StoreOpt = Annotated[Path, typer.Option(help="SQLite results file.")]
CacheOpt = Annotated[Path, typer.Option(help="Response cache file.")]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the cache.")]
PricesOpt = Annotated[
    Path | None, typer.Option(help="YAML of USD per million tokens, over the bundled prices.")
]
TimeoutOpt = Annotated[float, typer.Option(min=0.01, help="Seconds per model call.")]
RetriesOpt = Annotated[int, typer.Option(min=0, help="Retries of a failed model call.")]
ConcurrencyOpt = Annotated[int, typer.Option(min=1, help="Episodes run at once.")]
IdsOpt = Annotated[
    list[str] | None, typer.Option("--ids", help="Only these task ids (repeat, or a,b).")
]
TagsOpt = Annotated[
    list[str] | None, typer.Option("--tags", help="Only tasks with one of these tags (a,b).")
]
LevelOpt = Annotated[
    list[int] | None, typer.Option("--level", help="Only tasks of this level (repeatable).")
]
SampleOpt = Annotated[
    int | None, typer.Option(min=1, help="A random sample of N of the selected tasks (--seed).")
]
SeedOpt = Annotated[int, typer.Option(help="Seed of --sample: the same seed, the same tasks.")]
LimitOpt = Annotated[int | None, typer.Option(min=1, help="At most N tasks, in file order.")]


def task_selection(
    ids: list[str] | None,
    tags: list[str] | None,
    levels: list[int] | None,
    sample: int | None,
    seed: int,
    limit: int | None,
) -> dict[str, Any]:
    """The `load_tasks` parameters the selection options stand for (`--tags a,b` = two tags)."""

    def split(values: list[str] | None) -> list[str]:
        return [part for value in values or [] for part in value.split(",") if part]

    chosen: dict[str, Any] = {"ids": split(ids), "tags": split(tags), "levels": levels or []}
    chosen.update(sample=sample, seed=seed, limit=limit)
    return {key: value for key, value in chosen.items() if value not in ([], None)}


PLUGIN_ERRORS = (ProjectError, DuplicateEntry, UnresolvedReference)
"""A project file, plug-in or reference that cannot be loaded: the user's input, not a crash."""


@contextmanager
def user_errors() -> Iterator[None]:
    """Print located input errors one per line on stderr and exit with 2, without a traceback."""
    from harness.specs.located import SpecError

    try:
        yield
    except SpecError as exc:
        for problem in exc.problems:
            typer.echo(str(problem), err=True)
        raise typer.Exit(2) from None
    except PLUGIN_ERRORS as exc:
        fail(f"harness: {exc}")


def fail(message: str) -> NoReturn:
    """Bad input the command found itself: one line on stderr, exit 2."""
    typer.echo(message, err=True)
    raise typer.Exit(2)


def parse_model_option(option: str, text: str) -> dict[str, Any]:
    """A model given on the command line, as an id or a YAML mapping, checked."""
    from pydantic import ValidationError

    from harness.specs.agent import ModelRef
    from harness.specs.located import Location, SpecError, format_path
    from harness.specs.overrides import command_line_value

    where = Location(f"{option} {text}")
    data = command_line_value(text, where)
    try:
        return ModelRef.model_validate(data).model_dump(mode="json", exclude_none=True)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise SpecError.at(where, format_path(error["loc"]), error["msg"]) from None


def announce(pipeline_id: str, name: str) -> None:
    """Name a starting pipeline on stderr: the id to resume with, should the process die."""
    typer.echo(f"pipeline {pipeline_id} ({name}) started", err=True)


def print_outcome(outcome: Outcome, store_path: Path) -> int:
    """Print every report and the pipeline's summary; the exit code (1 when a gate failed or a
    node failed)."""
    from rich.console import Console

    from harness.pipeline.types import Report
    from harness.report.terminal import print_report
    from harness.store import Store

    console = Console()
    execution = outcome.execution
    exit_code = 1 if execution.failed else 0
    store = Store(store_path)
    try:
        for output in execution.outputs.values():
            if not isinstance(output, Report):
                continue
            print_report(store, output.contents(), console)
            if not all(gate.result.passed for gate in output.gates):
                exit_code = 1
            for file in output.files:
                console.print(f"wrote {file}")
    finally:
        store.close()
    states = ", ".join(f"{node} {status.state}" for node, status in execution.statuses.items())
    console.print(f"pipeline {outcome.pipeline_id} ({outcome.plan.name}): {states}")
    for node, status in execution.statuses.items():
        if status.error:
            console.print(f"[red]node {node} failed: {status.error}[/red]")
    console.print(f"stored in {store_path}")
    return exit_code

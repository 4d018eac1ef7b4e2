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
    from rich.console import Console

    from harness.pipeline.runner import Outcome
    from harness.store import Store

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


# Exit codes (README): a decision failed (a gate, a regression) is not the harness failing.
EXIT_DECISION = 1
EXIT_BAD_INPUT = 2
EXIT_HARNESS = 3


@contextmanager
def user_errors() -> Iterator[None]:
    """Print located input errors one per line on stderr and exit with 2, without a traceback."""
    from harness.specs.located import SpecError

    try:
        yield
    except SpecError as exc:
        for problem in exc.problems:
            echo_error(str(problem))
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except PLUGIN_ERRORS as exc:
        fail(f"harness: {exc}")


@contextmanager
def command_errors() -> Iterator[None]:
    """Around every command: bad input is its lines and exit 2 (`user_errors`); anything else
    that escapes (a store locked past its deadline, a bug) is one line and exit 3, the harness's
    own failure, never 1. `HARNESS_DEBUG=1` shows the traceback instead."""
    import os

    import click

    try:
        with user_errors():
            yield
    except (typer.Exit, typer.Abort, click.exceptions.Exit, click.ClickException, click.Abort):
        raise
    except Exception as exc:
        if os.environ.get("HARNESS_DEBUG"):
            raise
        echo_error(f"harness: error: {type(exc).__name__}: {exc}")
        raise typer.Exit(EXIT_HARNESS) from None


def echo_error(message: str) -> None:
    """One line on stderr, with every secret masked (a value echoed from a state file, a key)."""
    from harness.secrets import redact

    lines = redact(message).splitlines()
    typer.echo(lines[0] if lines else "", err=True)


def fail(message: str) -> NoReturn:
    """Bad input the command found itself: one line on stderr, exit 2."""
    echo_error(message)
    raise typer.Exit(EXIT_BAD_INPUT)


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


def warn_unsandboxed(store: Store, run_id: str, console: Console) -> None:
    """The summary's warning when checker code of a run ran without a real sandbox."""
    count = store.unsandboxed_verdicts(run_id)
    if count:
        console.print(
            f"warning: checker code of {count} verdict(s) of run {run_id} ran in the audit-hook "
            "subprocess, which is not a security boundary; install bubblewrap (bwrap) or run "
            "a Docker engine",
            style="yellow",
            markup=False,
            highlight=False,
        )


def print_outcome(outcome: Outcome, store_path: Path) -> int:
    """Print every report and the pipeline's summary; the exit code: 1 when a gate failed, 3
    when a node failed (the harness could not finish: no decision stands)."""
    from rich.console import Console

    from harness.pipeline.types import Graded, Report
    from harness.report.terminal import print_report
    from harness.secrets import redact
    from harness.store import Store

    console = Console()
    execution = outcome.execution
    exit_code = 0
    store = Store(store_path)
    try:
        for output in execution.outputs.values():
            if not isinstance(output, Report):
                continue
            print_report(store, output.contents(), console)
            if not all(gate.result.passed for gate in output.gates):
                exit_code = EXIT_DECISION
            for file in output.files:
                console.print(f"wrote {file}")
        graded = {o.run_id for o in execution.outputs.values() if isinstance(o, Graded)}
        for run_id in sorted(graded):
            warn_unsandboxed(store, run_id, console)
    finally:
        store.close()
    states = ", ".join(f"{node} {status.state}" for node, status in execution.statuses.items())
    console.print(f"pipeline {outcome.pipeline_id} ({outcome.plan.name}): {states}")
    for node, status in execution.statuses.items():
        if status.error:
            line = f"node {node} failed: {redact(status.error)}"
            console.print(line, style="red", markup=False, highlight=False)
    console.print(f"stored in {store_path}")
    return EXIT_HARNESS if execution.failed else exit_code

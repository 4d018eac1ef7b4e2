"""What the commands share: option types, bad input printed as one line per problem, exit
codes, model options, the console (`outcome.py` prints a finished pipeline)."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from harness.defaults import MAX_CONCURRENCY, MAX_TRIALS
from harness.imports import UnresolvedReference
from harness.project import ProjectError
from harness.registry import DuplicateEntry
from harness.store_location import ENV_VAR, BadStoreTarget, StoreLocation

if TYPE_CHECKING:
    from pydantic import BaseModel
    from rich.console import Console

    from harness.specs.agent import ModelRef
    from harness.store import Store


def store_option(value: str | StoreLocation) -> StoreLocation:
    """`--store` (or `$HARNESS_STORE`) as a location; one that is not a store is one line and
    exit 2 here, while parsing, before any command creates a folder or prints the value."""
    try:
        return StoreLocation.of(value)
    except BadStoreTarget as exc:
        fail(f"harness: --store: {exc}")


StoreOpt = Annotated[
    StoreLocation,
    typer.Option(
        parser=store_option,
        metavar="FILE|URL",
        envvar=ENV_VAR,
        help="Results store: a SQLite file (PATH or sqlite:///PATH), or a PostgreSQL URL"
        " postgresql://USER@HOST/DB.",
    ),
]
CacheOpt = Annotated[Path, typer.Option(help="Response cache file.")]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the cache.")]
PricesOpt = Annotated[
    Path | None, typer.Option(help="YAML of USD per million tokens, over the bundled prices.")
]


def option_check(model: str, name: str, option: str) -> Callable[[Any], Any]:
    """A check of option `option` by the rules of field `name` of the options model `model`
    (`harness.options`, imported when an option is checked: `harness --help` stays fast), the
    model the library call checks too: a value it refuses is one line and exit 2 while parsing
    (a huge count would only fail later, or hold memory per slot)."""

    def check(value: Any) -> Any:
        import harness.options

        if value is None:
            return value
        problem = harness.options.problem_of(getattr(harness.options, model), name, value)
        if problem is not None:
            fail(f"harness: {option}: {problem}")
        return value

    return check


ConcurrencyOpt = Annotated[
    int,
    typer.Option(
        callback=option_check("EvalOptions", "concurrency", "--concurrency"),
        help=f"Episodes run at once (1 to {MAX_CONCURRENCY:,}).",
    ),
]
TimeoutOpt = Annotated[
    float,
    typer.Option(
        callback=option_check("RuntimeOptions", "timeout_s", "--timeout"),
        help="Seconds per model call (0.01 to 86,400).",
    ),
]
RetriesOpt = Annotated[
    int,
    typer.Option(
        callback=option_check("RuntimeOptions", "retries", "--retries"),
        help="Retries of a failed model call (0 to 100).",
    ),
]
TrialsOpt = Annotated[
    int,
    typer.Option(
        callback=option_check("EvalOptions", "trials", "--trials"),
        help=f"Episodes per task (1 to {MAX_TRIALS:,}).",
    ),
]
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
    int | None,
    typer.Option(
        callback=option_check("SelectionOptions", "sample", "--sample"),
        help="A random sample of N of the selected tasks (--seed).",
    ),
]
SeedOpt = Annotated[
    int,
    typer.Option(
        callback=option_check("SelectionOptions", "seed", "--seed"),
        help="Seed of --sample (0 or more): the same seed, the same tasks.",
    ),
]
LimitOpt = Annotated[
    int | None,
    typer.Option(
        callback=option_check("SelectionOptions", "limit", "--limit"),
        help="At most N tasks, in file order.",
    ),
]
UnsafeCheckersOpt = Annotated[
    bool,
    typer.Option(
        "--unsafe-checkers",
        help="Let python checks' code run without OS isolation where neither bubblewrap nor a "
        "Docker engine is available (it could then read this machine's files and secrets); "
        "without it such runs are refused. Every such verdict and the summary say so.",
    ),
]
JsonOpt = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print one JSON object on stdout instead of the tables (other output on stderr).",
    ),
]


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


# Exit codes (docs/guide/commands.md): a decision failed (a gate, a regression) is not the
# harness failing.
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
    except (
        typer.Exit,
        typer.Abort,
        typer.TyperException,  # typer's own click: a bad option value is exit 2, as usage
        click.exceptions.Exit,
        click.ClickException,
        click.Abort,
    ):
        raise
    except Exception as exc:
        if os.environ.get("HARNESS_DEBUG"):
            raise
        echo_error(f"harness: error: {type(exc).__name__}: {exc}")
        raise typer.Exit(EXIT_HARNESS) from None


class _ClosedPipeTolerant(io.FileIO):
    """A standard stream's file descriptor that survives its reader going away: the first
    write that finds the pipe closed (`harness export RUN | head`) puts /dev/null over the
    descriptor, and this and every later write, by any object holding it, goes there.

    Python ignores SIGPIPE, so without this a closed pipe is a `BrokenPipeError` wherever the
    next write happens: in a command (reported as the harness's own failure, exit 3), in rich
    (which exits 1, a failed decision, even for a passing gate), or at exit (a traceback). With
    it the command runs to its end, and exits as it would have: what it does besides printing
    (a gate's history, a climb's records) is done, and its exit code is its decision's."""

    def write(self, data: Any) -> int:
        try:
            return super().write(data)
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self.fileno())
            finally:
                os.close(devnull)
            return memoryview(data).nbytes  # written, as far as anyone reading can tell


def tolerate_closed_pipes() -> None:
    """Put `sys.stdout` and `sys.stderr` on `_ClosedPipeTolerant` descriptors, with the same
    encoding, error handling and buffering as before (a stream that is not a file descriptor,
    such as a test runner's capture, is left alone)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):
            continue
        stream.flush()
        raw = _ClosedPipeTolerant(fd, "w", closefd=False)
        setattr(
            sys,
            name,
            io.TextIOWrapper(
                io.BufferedWriter(raw),
                encoding=stream.encoding,
                errors=stream.errors,
                line_buffering=stream.line_buffering,
                write_through=getattr(stream, "write_through", False),
            ),
        )


def echo_error(message: str) -> None:
    """One line on stderr, with every secret masked (a value echoed from a state file, a key)."""
    from harness.secrets import redact

    lines = redact(message).splitlines()
    typer.echo(lines[0] if lines else "", err=True)


def fail(message: str) -> NoReturn:
    """Bad input the command found itself: one line on stderr, exit 2. A line break in it
    comes from the input (a path, a store URL), so it is written `\\n`, not cut off."""
    echo_error(message.replace("\r", "\\r").replace("\n", "\\n"))
    raise typer.Exit(EXIT_BAD_INPUT)


def readable_file(option: str, path: Path | None) -> None:
    """A file option that must name a readable file: a missing one, a folder, a symlink loop
    or one without permission is one line naming the option, and exit 2, before anything is
    written."""
    import stat

    if path is None:
        return
    try:
        mode = path.stat().st_mode
    except (OSError, RuntimeError) as exc:  # a symlink loop: ELOOP
        from harness.specs.references import unreadable_file

        why = "file not found" if isinstance(exc, FileNotFoundError) else unreadable_file(path, exc)
        fail(f"harness: {option} {path}: {why}")
    if not stat.S_ISREG(mode):
        fail(f"harness: {option} {path}: expected a file")
    if not os.access(path, os.R_OK):
        fail(f"harness: {option} {path}: cannot read it: permission denied")


def parse_model_option(option: str, text: str | None) -> ModelRef | None:
    """A model given on the command line, as an id or a YAML mapping (None when not given),
    checked as every entry point checks a model (`harness.options.model_ref`: a scripted
    model's rules file must exist, relative to the working folder)."""
    from harness.options import model_ref
    from harness.specs.located import Location
    from harness.specs.overrides import command_line_value

    if text is None or text == "":
        return None
    where = Location(f"{option} {text}")
    return model_ref(command_line_value(text, where), where, "")


def make_console(stderr: bool = False) -> Console:
    """The console every command prints with. A terminal is measured by rich; output to a pipe
    or a file is $COLUMNS wide, else `defaults.PIPED_WIDTH`, not rich's 80 columns that cut ids
    short. Tables fold ids that still do not fit, never ellipsising them. What is printed has
    its own styles; rich's highlighting of numbers and strings in every line is off (compiling
    its patterns was a twentieth of a one-task run-eval)."""
    import os

    from rich.console import Console

    from harness.defaults import PIPED_WIDTH

    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        console.width = PIPED_WIDTH
    return console


def print_json(summary: BaseModel) -> None:
    """A machine-readable result: one JSON object on stdout, secrets masked."""
    from harness.secrets import redact

    typer.echo(redact(summary.model_dump_json(indent=2)))


@contextmanager
def json_stdout(as_json: bool) -> Iterator[None]:
    """With --json, whatever a library prints while the command works goes to stderr, so that
    stdout holds the JSON object alone."""
    import sys
    from contextlib import redirect_stdout

    if not as_json:
        yield
        return
    with redirect_stdout(sys.stderr):
        yield


def announce(pipeline_id: str, name: str) -> None:
    """Name a starting pipeline on stderr: the id to resume with, should the process die."""
    typer.echo(f"pipeline {pipeline_id} ({name}) started", err=True)


def warn_unsandboxed(store: Store, run_id: str, console: Console) -> None:
    """The summary's warning when checker code of a run ran without OS isolation (which only
    an explicit permission allows)."""
    count = store.unsandboxed_verdicts(run_id)
    if count:
        console.print(
            f"warning: checker code of {count} verdict(s) of run {run_id} ran WITHOUT OS "
            "isolation (allowed by --unsafe-checkers, a grade node's sandbox: none or "
            "HARNESS_SANDBOX=none): it could read this machine's files and secrets; install "
            "bubblewrap (apt-get install bubblewrap / dnf install bubblewrap) to isolate it",
            style="yellow",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )

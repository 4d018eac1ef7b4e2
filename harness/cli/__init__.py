"""The `harness` command line: one small module per command group. Only this package knows
about the command line; each command parses its arguments, calls one library function and
prints, importing heavy modules inside the command so that `harness --help` stays fast."""

from __future__ import annotations

import gc
import inspect
import sys
from typing import TYPE_CHECKING, Annotated, Any

# A command builds many objects that live until it ends (modules, a loaded suite, transcripts).
# At Python's default young-generation threshold (700) a 2,000-call run collected about 600
# times, 0.4 s of CPU; at 20,000, about 15 times (bench/end_to_end.py).
gc.set_threshold(20_000, 10, 10)

import typer  # noqa: E402
from typer.core import TyperGroup  # noqa: E402

from harness.cli import (  # noqa: E402
    climb,
    compare,
    domains,
    export,
    fake_server,
    fidelity,
    gate,
    grade,
    init,
    judge,
    personas,
    report,
    run_eval,
    runs,
    tasks,
    traces,
    validate,
    view,
    wandb_runs,
)

if TYPE_CHECKING:
    # Typer runs on its own copy of click (`typer._click`): the context and commands its groups
    # take and give are that copy's classes, not the `click` package's.
    from typer._click import Command, Context

COMMANDS_GROUP = "harness.commands"
"""Entry-point group of plug-in command groups: `name = "package.module:app"`, a Typer app that
becomes `harness name ...` (the tau2 plug-in's `harness tau2 import`)."""


class _Commands(TyperGroup):
    """The command group: whatever escapes a command becomes one line and an exit code. It also
    holds the installed plug-ins' command groups, each imported only when a command line names
    it (or `harness --help` lists it), so that the built-in commands import no plug-in."""

    def invoke(self, ctx: Context) -> Any:
        from harness.cli._common import command_errors

        with command_errors():
            return super().invoke(ctx)

    def list_commands(self, ctx: Context) -> list[str]:
        from importlib.metadata import entry_points

        builtin = super().list_commands(ctx)
        added = {point.name for point in entry_points(group=COMMANDS_GROUP)} - set(builtin)
        return [*builtin, *sorted(added)]

    def get_command(self, ctx: Context, name: str) -> Command | None:
        found = super().get_command(ctx, name)
        if found is not None:
            return unwrap_help(found)
        from importlib.metadata import entry_points

        for point in entry_points(group=COMMANDS_GROUP, name=name):
            try:
                command = typer.main.get_group(point.load())
            except Exception as exc:  # a broken plug-in install is the user's setup, not a crash
                typer.echo(f"harness: plug-in command '{name}' ({point.value}): {exc}", err=True)
                raise SystemExit(2) from None
            command.name = name
            return unwrap_help(command)
        return None


def unwrap_help(command: Command) -> Command:
    """`command` and its subcommands with each paragraph of their help on one line. A docstring
    is wrapped to the source's width, and Typer's rich help keeps those line breaks in every
    paragraph but the first (and in the first, too, in a group's list of commands), so a
    sentence broke wherever the source line ended, whatever the terminal's width. Joined, rich
    wraps each paragraph to the terminal. A paragraph that starts with `\\b` keeps its lines,
    as in click."""
    for attribute in ("help", "short_help"):
        text = getattr(command, attribute, None)
        if text:
            paragraphs = inspect.cleandoc(text).split("\n\n")
            setattr(command, attribute, "\n\n".join(map(_one_line, paragraphs)))
    for sub in getattr(command, "commands", {}).values():
        unwrap_help(sub)
    return command


def _one_line(paragraph: str) -> str:
    return (
        paragraph
        if paragraph.startswith("\b")
        else " ".join(line.strip() for line in paragraph.split("\n"))
    )


app = typer.Typer(
    cls=_Commands,
    help="Evaluate LLM agents on YAML tasks with simulated users, graders and a CI gate.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _command(
    ctx: typer.Context,
    secret_env: Annotated[
        list[str] | None,
        typer.Option(
            "--secret-env",
            metavar="NAME",
            help="Also mask the value of this environment variable everywhere (repeatable).",
        ),
    ] = None,
) -> None:
    from harness.cli._common import fail
    from harness.grading.sandbox import sandbox_env_problem
    from harness.secrets import declare_secret_env

    problem = sandbox_env_problem()
    if problem is not None:
        fail(f"harness: {problem}")
    for name in secret_env or []:
        declare_secret_env(name)
    # Every command reads each YAML file once, however many steps look at it.
    from harness.project import use_project_of
    from harness.specs.located import read_once

    ctx.with_resource(read_once())
    use_project_of(None)  # the working folder's project, until the command names its files


app.command("run-eval")(run_eval.run_eval)
app.command()(grade.grade)
app.command()(compare.compare)
app.command()(gate.gate)
app.command()(gate.history)
app.command()(export.export)
app.command()(validate.validate)
app.command("fake-server")(fake_server.fake_server)
app.command()(validate.schema)
app.add_typer(traces.traces_app, name="traces")
app.add_typer(runs.runs_app, name="runs")
app.add_typer(gate.baseline_app, name="baseline")
app.add_typer(tasks.tasks_app, name="tasks")
app.add_typer(domains.domains_app, name="domains")
app.add_typer(personas.personas_app, name="personas")
app.add_typer(judge.judge_app, name="judge")
app.command()(init.init)
app.command()(climb.climb)
app.command()(report.report)
app.command()(fidelity.fidelity)
app.command()(view.view)
app.command("wandb-flush")(wandb_runs.wandb_flush)


def main() -> None:
    """Entry point of the `harness` command. A project file or plug-in that cannot be loaded
    (registries load them on first use, wherever that is) is bad input: one line, exit 2.
    Output piped into a reader that stops early (`harness export RUN | head`) is dropped once
    the reader is gone, and the command ends as it would have, with its own exit code
    (`tolerate_closed_pipes`)."""
    from harness.cli._common import PLUGIN_ERRORS, tolerate_closed_pipes

    tolerate_closed_pipes()
    try:
        app(prog_name="harness")
    except PLUGIN_ERRORS as exc:
        typer.echo(f"harness: {exc}", err=True)
        raise SystemExit(2) from None
    finally:
        for stream in (sys.stdout, sys.stderr):  # what is still buffered, while errors show
            stream.flush()
        # The command is done: what it holds is left to the interpreter's teardown, which would
        # otherwise walk every object for cycles once more (a quarter of a second after a run
        # of 500 episodes). Files and stores are closed by then; `atexit` handlers still run.
        gc.freeze()

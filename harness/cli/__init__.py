"""The `harness` command line: one small module per command group. Only this package knows
about the command line; each command parses its arguments, calls one library function and
prints, importing heavy modules inside the command so that `harness --help` stays fast."""

from __future__ import annotations

import typer

from harness.cli import (
    compare,
    domains,
    fake_server,
    gate,
    grade,
    init,
    run_eval,
    runs,
    tasks,
    traces,
    validate,
)

app = typer.Typer(
    help="Evaluate LLM agents on YAML tasks with simulated users, graders and a CI gate.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("run-eval")(run_eval.run_eval)
app.command()(grade.grade)
app.command()(compare.compare)
app.command()(gate.gate)
app.command()(gate.history)
app.command()(validate.validate)
app.command("fake-server")(fake_server.fake_server)
app.command()(validate.schema)
app.add_typer(traces.traces_app, name="traces")
app.add_typer(runs.runs_app, name="runs")
app.add_typer(gate.baseline_app, name="baseline")
app.add_typer(tasks.tasks_app, name="tasks")
app.add_typer(domains.domains_app, name="domains")
app.command()(init.init)


def main() -> None:
    """Entry point of the `harness` command. A project file or plug-in that cannot be loaded
    (registries load them on first use, wherever that is) is bad input: one line, exit 2."""
    from harness.cli._common import PLUGIN_ERRORS

    try:
        app(prog_name="harness")
    except PLUGIN_ERRORS as exc:
        typer.echo(f"harness: {exc}", err=True)
        raise SystemExit(2) from None

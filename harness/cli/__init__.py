"""The `harness` command line: one small module per command group. Only this package knows
about the command line; each command parses its arguments, calls one library function and
prints, importing heavy modules inside the command so that `harness --help` stays fast."""

from __future__ import annotations

import typer

from harness.cli import compare, fake_server, gate, grade, run_eval, runs, traces, validate

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


def main() -> None:
    """Entry point of the `harness` command."""
    app(prog_name="harness")

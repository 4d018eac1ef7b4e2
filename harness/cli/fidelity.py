"""`harness fidelity`: the sim-to-real report of a run's simulated users against production's."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

import harness.cli.traces as session_options  # the session options of `traces to-tasks`
from harness import defaults
from harness.cli._common import StoreOpt, fail, make_console, option_check, user_errors


def _number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_report(report: Any) -> None:
    """The report as a table of dimensions, the index with its interval, the easy-mode
    dimensions and the outcome calibration."""
    from rich.table import Table

    table = Table(title="simulated vs production users", title_justify="left")
    for column in ("dimension", "family", "simulated mean", "production mean", "agreement"):
        table.add_column(column, overflow="fold")
    table.add_column("note", overflow="fold")
    for row in report.dimensions:
        table.add_row(
            row.name,
            row.family,
            f"{_number(row.simulated.mean)} (n={row.simulated.sessions})",
            f"{_number(row.production.mean)} (n={row.production.sessions})",
            _number(row.agreement),
            ("EASY MODE: " if row.easy_mode else "") + row.note,
        )
    make_console().print(table)
    if report.index is None:
        typer.echo("fidelity index: - (no dimension has values on both sides)")
    else:
        low, high = report.interval
        typer.echo(
            f"fidelity index {report.index:.1f} / 100 (95% interval {low:.1f}-{high:.1f}: "
            f"{report.covers})"
        )
    families = ", ".join(f"{name} {_number(value)}" for name, value in report.families.items())
    typer.echo(f"agreement by family: {families}")
    easy = ", ".join(report.easy_mode) or "none"
    typer.echo(f"easy-mode dimensions: {easy}")
    if report.outcome is not None:
        o = report.outcome
        typer.echo(
            f"outcome calibration on {o.tasks} task(s) from production ({o.sessions} sessions): "
            f"simulated pass {o.simulated_pass:.0%} vs production success "
            f"{o.production_success:.0%}, gap {o.gap:+.0%} (95% {o.gap_interval[0]:+.0%} to "
            f"{o.gap_interval[1]:+.0%}, bootstrap over tasks)"
        )
    typer.echo(
        f"{report.simulated_sessions} simulated session(s) of {report.simulated_tasks} task(s) "
        f"({report.left_out} left out), {report.production_sessions} production session(s)"
    )


def fidelity(
    run_id: Annotated[str, typer.Argument(help="The run whose simulated users are measured.")],
    against: session_options.SourceOpt = "local",
    trace_store: session_options.TraceStoreOpt = defaults.TRACE_STORE,
    status: session_options.StatusOpt = "any",
    negative: session_options.NegativeOpt = False,
    op: session_options.OpOpt = None,
    thread: session_options.ThreadOpt = None,
    since: session_options.SinceOpt = None,
    until: session_options.UntilOpt = None,
    store: StoreOpt = defaults.RESULTS_STORE,  # type: ignore[assignment]  # typer parses it
    bootstrap: Annotated[
        int,
        typer.Option(
            callback=option_check("MiningOptions", "bootstrap", "--bootstrap"),
            help="Bootstrap resamples of the interval (100 to 100,000).",
        ),
    ] = 1000,
    seed: Annotated[
        int,
        typer.Option(
            callback=option_check("MiningOptions", "seed", "--seed"),
            help="Seed of the bootstrap (0 or more).",
        ),
    ] = 0,
    html: Annotated[
        Path | None, typer.Option(help="Also write the run's HTML report, with this report.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
) -> None:
    """Compare how a run's simulated users behave with production's real users (the sessions
    of --against, read and filtered as `traces to-tasks` reads them): each dimension's two
    distributions and agreement, a 0-100 fidelity index with its bootstrap interval, the
    dimensions where simulation is easy mode, and, on tasks made from production traces, the
    simulated pass rate against production's outcome. The report is kept with the run (its
    HTML report shows it)."""
    from harness.api.stored import open_store, stored_run
    from harness.fidelity import run_fidelity
    from harness.production.behaviour import measure_calls
    from harness.report.html import write_html_report

    if html is not None and html.is_dir():
        fail(f"harness fidelity: --html {html}: a folder; expected an HTML file path")
    problems: list[Any] = []
    with user_errors():
        filters = session_options.session_filters(status, negative, op, thread, since, until)
        results = open_store(store)
    try:
        with user_errors():
            stored_run(results, run_id)
            calls, close = session_options.open_source(
                against, trace_store, filters, problems, "--against"
            )
        try:
            production = list(measure_calls(calls, problems, filters=filters))
        finally:
            close()
        if not production:
            fail(f"--against {against}: no production sessions found")
        report = run_fidelity(results, run_id, production, against, bootstrap, seed)
        if not report.simulated_sessions:
            fail(f"harness fidelity: run {run_id} has no episode with a simulated user turn")
        results.add_fidelity(run_id, against, report.model_dump_json())
        written = write_html_report(results, run_id, None, html) if html else None
    finally:
        results.close()
    for problem in problems:
        typer.echo(f"{getattr(problem, 'label', 'unreadable')} {problem}", err=True)
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        print_report(report)
    if written is not None:
        typer.echo(f"wrote {written}", err=as_json)

"""`harness runs`: pipeline executions and runs in the results store."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from harness import defaults
from harness.cli._common import StoreOpt, fail, make_console, user_errors, warn_unsandboxed
from harness.store_location import StoreLocation

runs_app = typer.Typer(
    help="Pipeline executions and runs in the results store.", no_args_is_help=True
)


@runs_app.command("list")
def runs_list(
    store: StoreOpt = defaults.RESULTS_STORE,  # type: ignore[assignment]  # typer parses it
    limit: Annotated[int, typer.Option(min=1, help="How many, newest first.")] = 20,
) -> None:
    """List pipeline executions with their runs."""
    from collections import Counter

    from rich.table import Table

    from harness.store import Store

    if not store.exists():
        fail(f"{store}: no results store (run an eval first)")
    results = Store(store)
    table = Table(title=f"Pipelines in {store}", title_justify="left")
    for column in ("pipeline", "name", "created", "status", "nodes", "runs"):
        table.add_column(column, overflow="fold")
    for info in results.pipelines(limit):
        counts = Counter(v["state"] for v in info.nodes.values())
        states = ", ".join(f"{state} {n}" for state, n in sorted(counts.items()))
        runs = ", ".join(f"{r.id} {r.variant}" for r in results.runs(info.id))
        table.add_row(info.id, info.name, info.created_at, info.status, states, runs)
    results.close()
    make_console().print(table)


@runs_app.command("show")
def runs_show(
    run_id: Annotated[str, typer.Argument(help="A pipeline id (dag-...) or a run id.")],
    store: StoreOpt = defaults.RESULTS_STORE,  # type: ignore[assignment]  # typer parses it
    results_: Annotated[
        bool,
        typer.Option(
            "--results", help="The summary run-eval printed (each run's, for a pipeline)."
        ),
    ] = False,
) -> None:
    """Show a pipeline's fully resolved configuration and nodes, or a run's configuration;
    with --results, the run's summary table instead."""
    import yaml

    from harness.report.paths import relative_paths
    from harness.store import Store

    if results_:
        show_results(run_id, store)
        return

    results = Store(store) if store.exists() else None
    pipeline = results.pipeline(run_id) if results else None
    run = results.run(run_id) if results and pipeline is None else None
    if results is None or (pipeline is None and run is None):
        fail(f"{store}: no pipeline or run {run_id!r}")
    shown: dict[str, Any]
    if pipeline is not None:
        shown = {
            "pipeline": pipeline.id,
            "name": pipeline.name,
            "status": pipeline.status,
            "created": pipeline.created_at,
            "nodes": pipeline.nodes,
            "runs": [r.id for r in results.runs(pipeline.id)],
            "config": pipeline.config,
        }
    else:
        assert run is not None
        shown = {
            "run": run.id,
            "variant": run.variant,
            "variant_hash": run.variant_hash,
            "status": run.status,
            "pipeline": run.pipeline_id,
            "config": run.config,
        }
    results.close()
    # the stored config holds resolved paths (the agent file's): shown as the user types them
    typer.echo(relative_paths(yaml.safe_dump(shown, sort_keys=False, allow_unicode=True)))


def show_results(run_id: str, store: StoreLocation) -> None:
    """Print the summary of a stored run, or of each run of a stored pipeline."""
    from harness.api.stored import stored_figures
    from harness.report.terminal import print_run
    from harness.store import Store

    with user_errors():
        figures = stored_figures(store, run_id)
    if not figures:
        typer.echo(f"pipeline {run_id} stored no runs")
    console = make_console()
    results = Store(store)
    try:
        for figure in figures:
            print_run(figure, console)
            warn_unsandboxed(results, figure.run_id, console)
    finally:
        results.close()

"""`harness personas`: simulated users mined from production traces."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from harness import defaults
from harness.cli._common import fail, option_check, user_errors
from harness.cli.traces import (
    NegativeOpt,
    OpOpt,
    SinceOpt,
    SourceOpt,
    StatusOpt,
    ThreadOpt,
    TraceStoreOpt,
    UntilOpt,
    open_source,
    session_filters,
)

personas_app = typer.Typer(
    help="Personas (simulated users), mined from production traces.", no_args_is_help=True
)


@personas_app.command("from-traces")
def personas_from_traces(
    out: Annotated[
        Path, typer.Option(help="Folder of the persona files (mined-*.yaml, overwritten).")
    ] = Path("personas/mined"),
    source: SourceOpt = "local",
    store: TraceStoreOpt = defaults.TRACE_STORE,
    status: StatusOpt = "any",
    negative: NegativeOpt = False,
    op: OpOpt = None,
    thread: ThreadOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    seed: Annotated[
        int,
        typer.Option(
            callback=option_check("MiningOptions", "seed", "--seed"),
            help="Seed of the clustering (0 or more).",
        ),
    ] = 0,
) -> None:
    """Measure how real users behave in production sessions (read and filtered as `traces
    to-tasks` reads them), cluster them into profiles and write one persona per profile, its
    `behaviour:` the measured values and its description the profile's share of traffic."""
    from harness.production.calls import skipped
    from harness.production.mine import mine_personas

    if out.exists() and not out.is_dir():
        fail(f"--out {out}: is a file, expected a folder")
    problems: list[Any] = []
    with user_errors():
        filters = session_filters(status, negative, op, thread, since, until)
        calls, close = open_source(source, store, filters, problems)
    try:
        written = mine_personas(calls, filters, problems, out, seed)
    finally:
        close()
    for problem in problems:
        typer.echo(f"{getattr(problem, 'label', 'unreadable')} {problem}", err=True)
    if not written:
        fail(f"--source {source}: no sessions found")
    for path in written:
        typer.echo(f"wrote {path}")
    typer.echo(f"{len(written)} persona(s) in {out}, {skipped(problems)} unreadable")

"""`harness report`: a run as one self-contained HTML file, to open in a browser or keep as a
CI artifact."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness import defaults
from harness.cli._common import StoreOpt, fail, user_errors


def report(
    run_id: Annotated[
        str, typer.Argument(help="The run to report; with --against, the baseline (A).")
    ],
    against: Annotated[
        str | None,
        typer.Option(
            help="The candidate run (B): the page is titled 'B vs A', with the A/B comparison, "
            "the gate's rules when a gate judged the two (its roles win) and side-by-side "
            "transcripts."
        ),
    ] = None,
    out: Annotated[Path, typer.Option(help="The HTML file to write.")] = Path("report.html"),
    store: StoreOpt = defaults.RESULTS_STORE,  # type: ignore[assignment]  # typer parses it
) -> None:
    """Write a run's HTML report: pass rate with its interval per level and tag, errors, cost
    and time, every episode as a chat with its state changes and checks, the A/B comparison
    with --against, the store's trends and the gate's decisions, and failure clusters. One
    file with no outside resource."""
    from harness.api.stored import open_store, stored_run
    from harness.report.html import write_html_report
    from harness.specs.located import one_line

    if out.is_dir():  # found before the report is built, not as a crash when it is written
        fail(f"harness report: --out {one_line(str(out))}: a folder; expected an HTML file path")
    with user_errors():
        results = open_store(store)
        try:
            for wanted in filter(None, (run_id, against)):
                stored_run(results, wanted)
            written = write_html_report(results, run_id, against, out)
        finally:
            results.close()
    size = written.stat().st_size
    typer.echo(f"wrote {written} ({size / 1e6:.1f} MB)")

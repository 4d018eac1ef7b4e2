"""The summary table of a run, printed with rich."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.table import Table

from harness.evaluate import RunSummary
from harness.stats import wilson_interval

STYLES = {"pass": "green", "fail": "red", "error": "yellow"}


def print_summary(summary: RunSummary, store_path: str, console: Console | None = None) -> None:
    """Per task: verdict, turns, end reason, failed checks; then the pass rate with its interval."""
    console = console or Console()
    table = Table(title=f"Run {summary.run_id}", title_justify="left")
    show_trial = any(row.trial for row in summary.rows)
    columns = [
        "task",
        "level",
        *(["trial"] if show_trial else []),
        "verdict",
        "turns",
        "end reason",
    ]
    for column in columns:
        table.add_column(column, no_wrap=True)
    table.add_column("failed checks", ratio=1)
    for row in summary.rows:
        verdict = row.verdict
        failed = ", ".join(c.name for c in verdict.failed_checks())
        if verdict.outcome == "error" and verdict.error_side:
            failed = f"[{verdict.error_side.value}] {verdict.reason}"
        style = STYLES[verdict.outcome]
        trial = [str(row.trial)] if show_trial else []
        table.add_row(
            row.task_id,
            str(row.level),
            *trial,
            f"[{style}]{verdict.outcome}[/{style}]",
            str(row.turns),
            row.end_reason,
            failed,
        )
    console.print(table)

    counts = Counter(row.verdict.outcome for row in summary.rows)
    graded = counts["pass"] + counts["fail"]
    low, high = wilson_interval(counts["pass"], graded)
    rate = f"{counts['pass'] / graded:.1%}" if graded else "n/a"
    console.print(
        f"pass rate [bold]{rate}[/bold] ({counts['pass']}/{graded}, 95% Wilson CI "
        f"{low:.1%}-{high:.1%})"
        + (f"; [yellow]{counts['error']} error(s) excluded[/yellow]" if counts["error"] else "")
    )
    console.print(f"agent [bold]{summary.variant}[/bold] hash {summary.variant_hash}")
    console.print(f"stored in {store_path} as run {summary.run_id}")

"""The summary table of a run, printed with rich."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.table import Table

from harness.evaluate import RunSummary
from harness.stats import bootstrap_interval, suite_pass_hat_k, wilson_interval
from harness.transcript import Usage

STYLES = {"pass": "green", "fail": "red", "error": "yellow"}


def print_summary(
    summary: RunSummary,
    store_path: str,
    unpriced: list[str] | None = None,
    console: Console | None = None,
) -> None:
    """Per task: verdict, turns, end reason, failed checks; then the pass rate with its interval,
    tokens and cost."""
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
            failed = f"[{verdict.error_side.value}] {verdict.reason[:80]}"
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
        f"{low:.1%}-{high:.1%}); failures {counts['fail']}"
    )
    outcomes: dict[str, list[bool]] = {}
    for row in summary.rows:
        if row.verdict.outcome != "error":
            outcomes.setdefault(row.task_id, []).append(row.verdict.outcome == "pass")
    trials = min((len(v) for v in outcomes.values()), default=0)
    if trials > 1:
        by_task = bootstrap_interval(outcomes)
        hat = ", ".join(
            f"pass^{k} {suite_pass_hat_k(outcomes, k):.1%}" for k in range(1, trials + 1)
        )
        console.print(
            f"per task over {trials} trials: {by_task.estimate:.1%} (95% bootstrap CI "
            f"by task {by_task.low:.1%}-{by_task.high:.1%}); {hat}"
        )
    if counts["error"]:
        sides = Counter(
            row.verdict.error_side.value
            for row in summary.rows
            if row.verdict.outcome == "error" and row.verdict.error_side
        )
        by_side = ", ".join(f"{side} {n}" for side, n in sorted(sides.items()))
        console.print(
            f"[yellow]errors {counts['error']} ({by_side}): not counted as pass or fail[/yellow]"
        )
    for role, attribute in (("agent", "usage"), ("user simulator", "user_usage")):
        total = Usage()
        for row in summary.rows:
            total.add(getattr(row, attribute))
        cached = f", {total.cached_calls} from cache" if total.cached_calls else ""
        console.print(
            f"{role}: {total.calls} model calls{cached}, {total.input_tokens:,} input and "
            f"{total.output_tokens:,} output tokens, ${total.cost_usd:.4f}"
        )
    if unpriced:
        console.print(f"[yellow]no price known for {', '.join(unpriced)}: counted as $0[/yellow]")
    console.print(f"agent [bold]{summary.variant}[/bold] hash {summary.variant_hash}")
    console.print(f"stored in {store_path} as run {summary.run_id}")

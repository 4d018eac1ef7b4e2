"""Terminal summaries, printed with rich: runs, comparisons, gate decisions, pipelines."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.compare import ComparisonResult, PassRate
from harness.gate import GateResult
from harness.report.contents import ReportContents
from harness.report.summary import RunFigures, run_figures
from harness.store import Store
from harness.transcript import Usage

STYLES = {"pass": "green", "fail": "red", "error": "yellow"}


def print_run(figures: RunFigures, console: Console) -> None:
    """Per task: verdict (or passes over trials), turns, end reason, failed checks; then the
    pass rate with its interval, errors by side, tokens and cost."""
    table = Table(title=f"Run {figures.run_id}", title_justify="left")
    for column in ("task", "level", "verdict", "turns", "end reason"):
        table.add_column(column, no_wrap=True)
    table.add_column("failed checks", ratio=1)
    for line in figures.tasks:
        style = STYLES.get(
            line.outcome, "red" if line.failed else ("green" if not line.errors else "yellow")
        )
        turns = (
            str(line.turns[0])
            if len(line.turns) == 1
            else f"{sum(line.turns) / len(line.turns):.1f}"
        )
        end = ", ".join(reason for reason, _ in line.end_reasons.most_common())
        why = ", ".join([*line.failed_checks, *line.error_reasons])
        table.add_row(
            line.task_id,
            str(line.level or ""),
            f"[{style}]{line.outcome}[/{style}]",
            turns,
            end,
            escape(why),
        )
    console.print(table)
    rate = f"{figures.rate:.1%}" if figures.graded else "n/a"
    console.print(
        f"pass rate [bold]{rate}[/bold] ({figures.passed}/{figures.graded}, 95% Wilson CI "
        f"{figures.low:.1%}-{figures.high:.1%}); failures {figures.graded - figures.passed}"
    )
    if figures.by_task is not None:
        estimate, low, high = figures.by_task
        hat = ", ".join(f"pass^{k} {value:.1%}" for k, value in figures.pass_hat_k)
        console.print(
            f"per task over {figures.trials} trials: {estimate:.1%} (95% bootstrap CI "
            f"by task {low:.1%}-{high:.1%}); {hat}"
        )
    errors = sum(figures.errors_by_side.values())
    if errors:
        by_side = ", ".join(f"{side} {n}" for side, n in sorted(figures.errors_by_side.items()))
        console.print(f"[yellow]errors {errors} ({by_side}): not counted as pass or fail[/yellow]")
    for role, usage in (("agent", figures.usage), ("user simulator", figures.user_usage)):
        print_usage(role, usage, console)
    console.print(f"agent [bold]{figures.variant}[/bold] hash {figures.variant_hash}")


def print_usage(role: str, usage: Usage, console: Console) -> None:
    cached = f", {usage.cached_calls} from cache" if usage.cached_calls else ""
    console.print(
        f"{role}: {usage.calls} model calls{cached}, {usage.input_tokens:,} input and "
        f"{usage.output_tokens:,} output tokens, ${usage.cost_usd:.4f}"
    )


def _rate(side: PassRate) -> str:
    interval = f"CI {side.low:.1%}-{side.high:.1%}"
    return f"{side.rate:.1%} ({side.passed}/{side.n}, {interval})"


def print_comparison(result: ComparisonResult, console: Console) -> None:
    """Pass rates, their paired difference and tests, pass^k, breakdowns, deltas and flips."""
    a, b = result.a, result.b
    console.print(f"[bold]A {a.variant}[/bold] ({a.run_id}): {_rate(a)}")
    console.print(f"[bold]B {b.variant}[/bold] ({b.run_id}): {_rate(b)}")
    d, m = result.difference, result.mcnemar
    console.print(
        f"B - A: {d.estimate:+.1%} (95% paired bootstrap CI {d.low:+.1%} to "
        f"{d.high:+.1%}); exact McNemar p = {m.p_value:.4f} ({m.b_only} pairs only B "
        f"passed, {m.a_only} only A) over {result.pairs} pairs"
        + (f", {result.excluded_errors} with errors left out" if result.excluded_errors else "")
    )
    hat = result.pass_hat_k
    if hat.k > 1:
        console.print(f"pass^{hat.k}: A {hat.a:.1%}, B {hat.b:.1%}")
    if result.relative is not None:
        r = result.relative
        console.print(
            f"relative judge: B wins {r.win_rate:.1%} (CI {r.low:.1%}-"
            f"{r.high:.1%}; {r.b_wins} wins, {r.a_wins} losses, {r.ties} "
            f"ties, {r.judge_errors} judge errors)"
        )
    table = Table(title="breakdown", title_justify="left")
    for column in ("by", "group", "A", "B"):
        table.add_column(column)
    for name, groups in result.breakdowns.items():
        for label, rates in groups.items():
            table.add_row(name, label, _rate(rates.a), _rate(rates.b))
    console.print(table)
    deltas = result.deltas
    console.print(
        f"deltas B - A per episode: cost ${deltas.cost_usd:+.4f}, time "
        f"{deltas.latency_s:+.2f}s, turns {deltas.turns:+.2f}"
    )
    console.print(f"flipped to fail: {', '.join(result.flipped_to_fail) or 'none'}")
    console.print(f"flipped to pass: {', '.join(result.flipped_to_pass) or 'none'}")


def print_gate(result: GateResult, console: Console) -> None:
    if result.passed:
        console.print("[bold green]gate: PASS[/bold green]")
        return
    console.print("[bold red]gate: FAIL[/bold red]")
    for reason in result.reasons:
        console.print(f"  - {escape(reason)}")


def print_report(store: Store, report: ReportContents, console: Console) -> None:
    """Each run's summary, then each comparison, then each gate decision."""
    for run in report.runs:
        print_run(run_figures(store, run.run_id, run.levels), console)
    for comparison in report.comparisons:
        print_comparison(comparison, console)
    for gate in report.gates:
        print_gate(gate, console)

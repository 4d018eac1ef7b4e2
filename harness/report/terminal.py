"""Terminal summaries, printed with rich: runs, comparisons, gate decisions, pipelines."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.compare import ComparisonResult, PassRate
from harness.compare.money import signed_usd, usd
from harness.gate import GateResult
from harness.report.contents import ReportContents
from harness.report.lines import (
    difference_line,
    errors_line,
    evidence_line,
    mcnemar_line,
    verdict_line,
)
from harness.report.summary import RunFigures, run_figures
from harness.store import Store
from harness.transcript import Usage

STYLES = {"pass": "green", "fail": "red", "error": "yellow"}


SHOWN_TASKS = 50
"""Tasks a run's summary lists after a run (every one with `harness runs show ID --results`):
beyond it, the tasks that did not pass come first and the passing rest are counted."""


def print_run(figures: RunFigures, console: Console, limit: int | None = None) -> None:
    """Per task: verdict (or passes over trials), turns, end reason, why it did not pass (a
    crash's exception, an error's reason, the failed checks); then the pass rate with its
    interval, errors by side, tokens and cost. With `limit`, at most that many tasks are
    listed, those that did not pass first."""
    lines = figures.tasks
    if limit is not None and len(lines) > limit:
        lines = sorted(lines, key=lambda line: not (line.failed or line.errors))[:limit]
    table = Table(title=f"Run {figures.run_id}", title_justify="left")
    table.add_column("task", overflow="fold")  # an id: folded when it cannot fit, never cut
    for column in ("level", "verdict", "turns", "end reason"):
        table.add_column(column, no_wrap=True)
    table.add_column("failed checks and errors", ratio=1, overflow="fold")
    for line in lines:
        style = STYLES.get(
            line.outcome, "red" if line.failed else ("green" if not line.errors else "yellow")
        )
        turns = (
            str(line.turns[0])
            if len(line.turns) == 1
            else f"{sum(line.turns) / len(line.turns):.1f}"
        )
        end = ", ".join(reason for reason, _ in line.end_reasons.most_common())
        why = ", ".join([*line.error_reasons, *line.failed_checks])  # a crash's exception first
        table.add_row(
            line.task_id,
            str(line.level or ""),
            f"[{style}]{line.outcome}[/{style}]",
            turns,
            end,
            escape(why),
        )
    console.print(table)
    if len(lines) < len(figures.tasks):
        listed = {line.task_id for line in lines}
        rest = [line for line in figures.tasks if line.task_id not in listed]
        failing = sum(1 for line in rest if line.failed or line.errors)
        status = f"{failing} of them did not pass" if failing else "all passed"
        console.print(
            f"{len(rest)} more tasks, {status} (every task: harness runs show "
            f"{figures.run_id} --results)"
        )
    if figures.too_many_errors:  # before any rate: the rate is no result
        console.print(figures.errored_line(), style="red", markup=False, highlight=False)
    rate = f"{figures.rate:.1%}" if figures.graded else "n/a"
    console.print(
        f"pass rate [bold]{rate}[/bold] ({figures.counts_text}, "
        f"{figures.interval_text}); failures {figures.graded - figures.passed}"
    )
    if figures.pass_hat_k:
        hat = ", ".join(f"pass^{k} {value:.1%}" for k, value in figures.pass_hat_k)
        console.print(f"over {figures.trials} trials per task: {hat}")
    errors = sum(figures.errors_by_side.values())
    if errors:
        by_side = ", ".join(f"{side} {n}" for side, n in sorted(figures.errors_by_side.items()))
        console.print(f"[yellow]errors {errors} ({by_side}): not counted as pass or fail[/yellow]")
    soft = sum(figures.soft_errors_by_side.values())
    if soft:
        by_side = ", ".join(
            f"{side} {n}" for side, n in sorted(figures.soft_errors_by_side.items())
        )
        console.print(
            f"[yellow]soft checks that could not decide: {soft} episodes ({by_side}): their "
            "verdicts stand (soft checks decide nothing)[/yellow]"
        )
    for role, usage in (("agent", figures.usage), ("user simulator", figures.user_usage)):
        print_usage(role, usage, console)
    if figures.judge_usage.calls:
        print_usage("judge", figures.judge_usage, console)
        console.print(f"cost {usd(figures.cost_usd)} (agent, user simulator and judge)")
    console.print(f"agent [bold]{figures.variant}[/bold] hash {figures.variant_hash}")


def print_usage(role: str, usage: Usage, console: Console) -> None:
    cached = f", {usage.cached_calls} from cache" if usage.cached_calls else ""
    unpriced = (
        f" [yellow](no price for {', '.join(usage.unpriced)}: counted as $0)[/yellow]"
        if usage.unpriced
        else ""
    )
    console.print(
        f"{role}: {usage.calls} model calls{cached}, {usage.input_tokens:,} input and "
        f"{usage.output_tokens:,} output tokens, {usd(usage.cost_usd)}{unpriced}"
    )


def _rate(side: PassRate) -> str:
    interval = f"CI {side.low:.1%}-{side.high:.1%}"
    return f"{side.rate:.1%} ({side.passed}/{side.n}, {interval} clustered by {side.tasks} tasks)"


def print_comparison(result: ComparisonResult, console: Console) -> None:
    """Pass rates, their paired difference and tests, pass^k, breakdowns, deltas and flips."""
    a, b = result.a, result.b
    for note in result.notes:  # what was compared, when not both runs whole
        console.print(escape(note), style="yellow")
    console.print(f"[bold]A {a.variant}[/bold] ({a.run_id}): {_rate(a)}")
    console.print(f"[bold]B {b.variant}[/bold] ({b.run_id}): {_rate(b)}")
    console.print(f"[bold]verdict: {verdict_line(result)}[/bold]")
    console.print(difference_line(result))
    console.print(mcnemar_line(result))
    if (errors := errors_line(result)) is not None:
        console.print(f"[yellow]{errors}[/yellow]")
    if result.pass_hat_k:
        hats = ", ".join(f"pass^{h.k}: A {h.a:.1%}, B {h.b:.1%}" for h in result.pass_hat_k)
        console.print(hats)
    if result.relative is not None:
        console.print(escape(result.relative.line()))
    table = Table(title="breakdown (task-clustered)", title_justify="left")
    for column in ("by", "group", "A", "B", "B - A (95% CI)", "p"):
        table.add_column(column, overflow="fold")
    for name, groups in result.breakdowns.items():
        for label, rates in groups.items():
            d = rates.difference
            change = f"{d.difference:+.1%} ({d.low:+.1%} to {d.high:+.1%})" if d else ""
            table.add_row(
                name, label, _rate(rates.a), _rate(rates.b), change, f"{d.p_value:.3f}" if d else ""
            )
    console.print(table)
    deltas = result.deltas
    console.print(
        f"deltas B - A per episode: cost {signed_usd(deltas.cost_usd)}, time "
        f"{deltas.latency_s:+.2f}s, turns {deltas.turns:+.2f}"
    )
    console.print(f"flipped to fail: {', '.join(result.flipped_to_fail) or 'none'}")
    console.print(f"flipped to pass: {', '.join(result.flipped_to_pass) or 'none'}")


def print_gate(result: GateResult, console: Console) -> None:
    """The decision first (PASS, FAIL or UNDECIDED, and whether it blocks), then every rule that
    failed or could not decide with its figures, the evidence the gate played, and, when it
    passed, the rules it checked."""
    if result.comparison is not None:
        console.print(f"verdict: {verdict_line(result.comparison)}")
    undecided = [rule for rule in result.rules if rule.status == "undecided"]
    if result.status == "pass":
        console.print("[bold green]gate: PASS[/bold green]")
    elif result.status == "fail":
        more = f" ({len(undecided)} undecided)" if undecided else ""
        console.print(f"[bold red]gate: FAIL[/bold red]{more}")
    else:
        blocks = "it blocks (on_undecided: fail)" if result.blocks else "on_undecided: warn"
        console.print(
            f"[bold yellow]gate: UNDECIDED[/bold yellow]: {len(undecided)} rule(s) could not "
            f"decide even with the evidence the gate could play; {blocks}"
        )
    for reason in result.reasons:
        console.print(f"  - {escape(reason)}")
    for rule in undecided:
        console.print(f"  [yellow]??[/yellow] {escape(rule.detail)}")
    for played in result.evidence:
        console.print(f"  evidence: {escape(evidence_line(played))}")
    if result.unplayed:
        console.print(f"  [yellow]evidence {escape(result.unplayed)}[/yellow]")
    if result.status == "pass":
        for rule in result.rules:
            console.print(f"  [green]ok[/green] {escape(rule.detail)}")


def print_report(store: Store, report: ReportContents, console: Console) -> dict[str, RunFigures]:
    """Each run's summary, then each comparison, then each gate decision; the runs' figures, by
    run id (reading a run's episodes again costs what its summary did)."""
    shown = {}
    for run in report.runs:
        shown[run.run_id] = run_figures(store, run.run_id, run.levels)
        print_run(shown[run.run_id], console, SHOWN_TASKS)
    for comparison in report.comparisons:
        print_comparison(comparison, console)
    for gate in report.gates:
        print_gate(gate, console)
    return shown

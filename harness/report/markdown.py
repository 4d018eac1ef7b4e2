"""A Markdown summary of a report, fit for a pull-request comment."""

from __future__ import annotations

from harness.compare import ComparisonResult, PassRate
from harness.gate import GateResult
from harness.report.contents import ReportContents, ReportedRun
from harness.report.lines import (
    difference_line,
    errors_line,
    evidence_line,
    mcnemar_line,
    verdict_line,
)
from harness.report.paths import relative_paths
from harness.report.summary import run_figures
from harness.store import Store


def _rate(side: PassRate) -> str:
    return (
        f"{side.rate:.1%} ({side.passed}/{side.n}, 95% CI {side.low:.1%}-{side.high:.1%} "
        f"clustered by {side.tasks} tasks)"
    )


def render_markdown(store: Store, report: ReportContents) -> str:
    """Gate decisions first, then comparisons, then each run's table; no absolute path of
    the user's machine (`relative_paths`): a pull-request comment is read by others."""
    out: list[str] = []
    for gate in report.gates:
        out += _gate(gate)
    for comparison in report.comparisons:
        out += _comparison(comparison)
    for run in report.runs:
        out += _run(store, run)
    return relative_paths("\n".join(out).rstrip() + "\n")


def _gate(gate: GateResult) -> list[str]:
    """The decision, the failed and undecided rules with their figures, the evidence the gate
    played, then every rule that passed."""
    verdict = {
        "pass": "✅ **PASS**",
        "fail": "❌ **FAIL**",
        "undecided": "❔ **UNDECIDED**" + (" (blocks)" if gate.blocks else " (on_undecided: warn)"),
    }[gate.status]
    out = [
        f"## Gate: {verdict}\n",
        f"Candidate `{gate.candidate_variant}` ({gate.candidate_run}), baseline "
        f"{gate.baseline_run or 'none'}.\n",
        *(f"- {reason}" for reason in gate.reasons),
        *(f"- ❔ {line}" for line in gate.undecided),
        "",
    ]
    if gate.notes:
        out += ["Runs compared:\n", *(f"- {note}" for note in gate.notes), ""]
    if gate.evidence or gate.unplayed:
        out += [
            "Evidence the gate played before deciding:\n",
            *(f"- {evidence_line(played)}" for played in gate.evidence),
            *([f"- {gate.unplayed}"] if gate.unplayed else []),
            "",
        ]
    if gate.comparison is not None:
        out += [f"Verdict: {verdict_line(gate.comparison)}.\n"]
    passed = [rule for rule in gate.rules if rule.status == "pass"]
    if passed:
        out += ["Rules that hold:\n", *(f"- ✅ {rule.detail}" for rule in passed), ""]
    if gate.baseline_run is None:
        out += ["No baseline: the comparison rules did not apply.\n"]
    return out


def _comparison(r: ComparisonResult) -> list[str]:
    out = [f"## {r.b.variant} vs {r.a.variant}\n", *(f"{note}\n" for note in r.notes)]
    out.append(f"**{verdict_line(r)}**\n")
    out.append("| | A | B |\n|---|---|---|")
    out.append(f"| pass rate | {_rate(r.a)} | {_rate(r.b)} |")
    for hat in r.pass_hat_k:
        out.append(f"| pass^{hat.k} | {hat.a:.1%} | {hat.b:.1%} |")
    for name in ("cost_usd", "latency_s", "turns"):
        a, b = getattr(r.spend.a, name), getattr(r.spend.b, name)
        out.append(f"| {name} per episode | {a:.4g} | {b:.4g} |")
    out.append(f"\n{difference_line(r)}.  ")
    out.append(f"{mcnemar_line(r)}.")
    if (errors := errors_line(r)) is not None:
        out.append(f"\n{errors}.")
    rows = [
        f"| {name} | {label} | {_rate(rates.a)} | {_rate(rates.b)} | "
        f"{d.difference:+.1%} ({d.low:+.1%} to {d.high:+.1%}) | {d.p_value:.3f} |"
        for name, groups in r.breakdowns.items()
        for label, rates in groups.items()
        if (d := rates.difference) is not None
    ]
    if rows:
        out += ["\n| by | group | A | B | B - A (95% CI) | p |", "|---|---|---|---|---|---|", *rows]
    if r.relative is not None:
        line = r.relative.line()
        out.append(f"{line[0].upper()}{line[1:]}.")
    out.append(f"\nFlipped to fail: {', '.join(r.flipped_to_fail) or 'none'}  ")
    out.append(f"Flipped to pass: {', '.join(r.flipped_to_pass) or 'none'}\n")
    return out


def _run(store: Store, run: ReportedRun) -> list[str]:
    figures = run_figures(store, run.run_id, run.levels)
    out = [
        f"## Run {figures.run_id}: `{figures.variant}` ({figures.variant_hash})\n",
        f"Pass rate **{figures.rate:.1%}** ({figures.passed}/{figures.graded} episodes, "
        f"{figures.interval_text}).",
    ]
    errors = sum(figures.errors_by_side.values())
    if errors:
        sides = ", ".join(f"{s} {n}" for s, n in sorted(figures.errors_by_side.items()))
        out.append(f"Errors (not counted): {errors} ({sides}).")
    soft = sum(figures.soft_errors_by_side.values())
    if soft:
        sides = ", ".join(f"{s} {n}" for s, n in sorted(figures.soft_errors_by_side.items()))
        out.append(f"Soft checks that could not decide: {soft} episodes ({sides}).")
    unpriced = sorted({*figures.usage.unpriced, *figures.user_usage.unpriced})
    if unpriced:
        out.append(f"No price for {', '.join(unpriced)}: their calls are counted as $0.")
    out.append("\n| task | level | verdict | failed checks |\n|---|---|---|---|")
    for line in figures.tasks:
        why = ", ".join([*line.failed_checks, *line.error_reasons]).replace("|", "\\|")
        out.append(f"| {line.task_id} | {line.level or ''} | {line.outcome} | {why} |")
    out.append("")
    return out

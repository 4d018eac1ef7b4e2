"""A Markdown summary of a report, fit for a pull-request comment."""

from __future__ import annotations

from typing import Any

from harness.pipeline.types import Report
from harness.report.summary import run_figures
from harness.store import Store


def _rate(side: dict[str, Any]) -> str:
    return (
        f"{side['rate']:.1%} ({side['passed']}/{side['n']}, 95% CI {side['low']:.1%}-"
        f"{side['high']:.1%})"
    )


def render_markdown(store: Store, report: Report) -> str:
    """Gate decisions first, then comparisons, then each run's table."""
    out: list[str] = []
    for gate in report.gates:
        verdict = "✅ **PASS**" if gate.passed else "❌ **FAIL**"
        out.append(f"## Gate: {verdict}\n")
        out.append(
            f"Candidate `{gate.candidate.variant}` ({gate.candidate.run_id}), baseline "
            f"{gate.baseline_run or 'none'}.\n"
        )
        out += [f"- {reason}" for reason in gate.reasons]
        out.append("")
    for comparison in report.comparisons:
        r = comparison.result
        d, m = r["difference"], r["mcnemar"]
        out.append(f"## {r['b']['variant']} vs {r['a']['variant']}\n")
        out.append("| | A | B |\n|---|---|---|")
        out.append(f"| pass rate | {_rate(r['a'])} | {_rate(r['b'])} |")
        if r["pass_hat_k"]["k"] > 1:
            k = r["pass_hat_k"]
            out.append(f"| pass^{k['k']} | {k['a']:.1%} | {k['b']:.1%} |")
        for name in ("cost_usd", "latency_s", "turns"):
            out.append(
                f"| {name} per episode | {r['spend']['a'][name]:.4g} | "
                f"{r['spend']['b'][name]:.4g} |"
            )
        out.append(
            f"\nB - A: **{d['estimate']:+.1%}** (95% paired bootstrap CI {d['low']:+.1%} "
            f"to {d['high']:+.1%}), exact McNemar p = {m['p_value']:.4f}."
        )
        if "relative" in r:
            rel = r["relative"]
            out.append(
                f"Relative judge: B wins {rel['win_rate']:.1%} (95% CI {rel['low']:.1%}-"
                f"{rel['high']:.1%})."
            )
        out.append(f"\nFlipped to fail: {', '.join(r['flipped_to_fail']) or 'none'}  ")
        out.append(f"Flipped to pass: {', '.join(r['flipped_to_pass']) or 'none'}\n")
    for graded in report.runs:
        levels = {case.task.id: case.task.level for case in graded.cases}
        figures = run_figures(store, graded.run_id, levels)
        out.append(f"## Run {figures.run_id}: `{figures.variant}` ({figures.variant_hash})\n")
        out.append(
            f"Pass rate **{figures.rate:.1%}** ({figures.passed}/{figures.graded}, 95% "
            f"Wilson CI {figures.low:.1%}-{figures.high:.1%})."
        )
        errors = sum(figures.errors_by_side.values())
        if errors:
            sides = ", ".join(f"{s} {n}" for s, n in sorted(figures.errors_by_side.items()))
            out.append(f"Errors (not counted): {errors} ({sides}).")
        out.append("\n| task | level | verdict | failed checks |\n|---|---|---|---|")
        for line in figures.tasks:
            why = ", ".join([*line.failed_checks, *line.error_reasons]).replace("|", "\\|")
            out.append(f"| {line.task_id} | {line.level or ''} | {line.outcome} | {why} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"

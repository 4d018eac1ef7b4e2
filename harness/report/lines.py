"""One-line statements of a comparison, shared by the terminal and Markdown reports."""

from __future__ import annotations

from harness.compare import ComparisonResult


def verdict_line(result: ComparisonResult) -> str:
    """The comparison's answer in one line: better, worse or no detectable difference, and the
    smallest effect this many tasks could detect."""
    d = result.tasks
    answer = {"better": "B better", "worse": "B worse"}.get(result.verdict, result.verdict)
    return (
        f"{answer} (two-sided p = {d.p_value:.4f} over {d.tasks} tasks, alpha "
        f"{result.alpha:g}); minimum detectable effect at this size: {d.mde * 100:.1f} points"
    )


def difference_line(result: ComparisonResult) -> str:
    """B - A with the task as the unit: interval, standard error and the paired test."""
    d = result.tasks
    test = "exact sign-flip" if d.exact else "sign-flip (20,000 random flips)"
    return (
        f"B - A: {d.difference:+.1%} by task (95% paired cluster-bootstrap CI {d.low:+.1%} to "
        f"{d.high:+.1%}, cluster-robust SE {d.se:.1%}); {test} p = {d.p_value:.4f} over "
        f"{d.tasks} tasks ({d.better_tasks} better, {d.worse_tasks} worse)"
    )


def mcnemar_line(result: ComparisonResult) -> str:
    m = result.mcnemar
    return (
        f"exact McNemar p = {m.p_value:.4f} ({m.b_only} pairs only B passed, {m.a_only} only A) "
        f"over {result.pairs} pairs: assumes independent trials, decides nothing"
    )

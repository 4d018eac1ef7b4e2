"""One-line statements of a comparison and of a gate's evidence, shared by the terminal and
Markdown reports."""

from __future__ import annotations

from harness.compare import ComparisonResult
from harness.gate import EvidenceRound


def verdict_line(result: ComparisonResult) -> str:
    """The comparison's answer in one line: better, worse or no detectable difference, and the
    smallest effect this many tasks could detect; or undecided, and why."""
    d = result.tasks
    answer = {"better": "B better", "worse": "B worse"}.get(result.verdict, result.verdict)
    why = f": {result.verdict_reason}" if result.verdict_reason else ""
    return (
        f"{answer}{why} (two-sided p = {d.p_value:.4f} over {d.tasks} tasks, alpha "
        f"{result.alpha:g}); minimum detectable effect at this size: {d.mde * 100:.1f} points"
    )


def errors_line(result: ComparisonResult) -> str | None:
    """Each side's missing evidence and the difference with it counted either way; None when
    both sides have evidence on every pair."""
    if result.errors_a is None or result.errors_b is None or result.bounds is None:
        return None
    a, b, bounds = result.errors_a, result.errors_b, result.bounds
    return (
        f"errors: A {a.missing}/{a.episodes} ({a.rate:.1%}), B {b.missing}/{b.episodes} "
        f"({b.rate:.1%}) of the pairs both played, left out of the figures above; counted as "
        f"passes for A and fails for B: {bounds.a_favoured.difference:+.1%} (p = "
        f"{bounds.a_favoured.p_value:.4f}), the other way: {bounds.b_favoured.difference:+.1%} "
        f"(p = {bounds.b_favoured.p_value:.4f}); error ceiling {result.max_error_rate:.0%}"
    )


def difference_line(result: ComparisonResult) -> str:
    """B - A with the task as the unit: interval, standard error and the paired test."""
    d = result.tasks
    test = "exact sign-flip" if d.exact else "sign-flip (20,000 random flips)"
    return (
        f"B - A: {d.difference:+.1%} by task (95% CI {d.low:+.1%} to {d.high:+.1%} over the "
        f"tasks' population, cluster-robust SE {d.se:.1%}); {test} p = {d.p_value:.4f} over "
        f"{d.tasks} tasks ({d.better_tasks} better, {d.worse_tasks} worse)"
    )


def mcnemar_line(result: ComparisonResult) -> str:
    m = result.mcnemar
    return (
        f"exact McNemar p = {m.p_value:.4f} ({m.b_only} pairs only B passed, {m.a_only} only A) "
        f"over {result.pairs} pairs: assumes independent trials, decides nothing"
    )


def evidence_line(played: EvidenceRound) -> str:
    """One round of evidence the gate played, in one line."""
    kinds: dict[str, list[str]] = {}
    for task, why in played.why.items():
        for reason in why:
            kinds.setdefault(reason, []).append(task)
    shown = "; ".join(f"{reason}: {', '.join(tasks)}" for reason, tasks in sorted(kinds.items()))
    runs = ", ".join(run for run in (played.candidate_run, played.baseline_run) if run)
    return (
        f"round {played.round}: played {played.candidate_episodes} candidate and "
        f"{played.baseline_episodes} baseline episodes ({shown}) into {runs}"
    )

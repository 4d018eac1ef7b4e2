"""A task's verdict from its checks: every hard check must pass (the VerIF rule)."""

from __future__ import annotations

from harness.grading.checks import run_check
from harness.grading.result import CheckResult, Verdict
from harness.specs.task import Task
from harness.transcript import Side, Transcript


def grade(task: Task, transcript: Transcript) -> Verdict:
    """Grade one episode. An episode that ended in error, or a gating check that could not
    decide, gives an `error` verdict: excluded from pass rates, never counted as a fail."""
    results = [run_check(check, transcript) for check in task.checks]
    base = {
        "task_id": task.id,
        "trial": transcript.trial,
        "checks": results,
        "score": _score(results),
    }
    if transcript.error is not None:
        return Verdict(
            **base,
            outcome="error",
            error_side=transcript.error.side,
            reason=transcript.error.message,
        )
    errored = [c for c in results if c.gates and c.outcome == "error"]
    failed = [c for c in results if c.gates and c.outcome == "fail"]
    if failed:
        return Verdict(
            **base, outcome="fail", reason="; ".join(f"{c.name}: {c.reason}" for c in failed)
        )
    if errored:
        return Verdict(
            **base,
            outcome="error",
            error_side=Side.CHECKER,
            reason="; ".join(f"{c.name}: {c.reason}" for c in errored),
        )
    return Verdict(**base, outcome="pass", reason="all hard checks passed")


def _score(results: list[CheckResult]) -> float:
    """Weighted mean score of the non-diagnostic checks that decided."""
    counted = [c for c in results if not c.diagnostic and c.outcome != "error"]
    total = sum(c.weight for c in counted)
    return round(sum(c.score * c.weight for c in counted) / total, 4) if total else 0.0

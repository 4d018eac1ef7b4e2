"""A task's verdict from its checks: every hard check must pass (the VerIF rule)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TypedDict

from harness.grading.checks import CheckContext, error_side, run_check
from harness.grading.result import CheckResult, Verdict
from harness.transcript import Transcript


async def grade(transcript: Transcript, context: CheckContext) -> Verdict:
    """Run every check of the task on one episode (concurrently) and decide its verdict."""
    checks = context.task.checks
    results = list(await asyncio.gather(*(run_check(c, transcript, context) for c in checks)))
    end = context.task.end
    if end.require and transcript.error is None:
        results.append(end_result(transcript, end.require, end.admits(transcript.end_reason)))
    return decide(transcript, results)


def end_result(transcript: Transcript, required: Sequence[str], admitted: bool) -> CheckResult:
    """The task's `end.require` as a hard check result: how the episode ended, against it."""
    reason = (
        f"the episode ended with {transcript.end_reason.value}; required: {', '.join(required)}"
    )
    return CheckResult(
        name="end", kind="end", outcome="pass" if admitted else "fail", score=float(admitted),
        reason=reason,
    )  # fmt: skip


def decide(transcript: Transcript, results: list[CheckResult]) -> Verdict:
    """The verdict from check results. The agent's own failure (end reason `agent_crash`: it
    crashed, returned no reply, or its service failed; `harness.sim.agent`) and a failed hard
    check fail the task; otherwise an episode that ended in error (missing evidence), or a hard
    check that could not decide, gives an `error` verdict: excluded from pass rates and never
    counted as a fail. A soft check that could not decide leaves a pass a pass, and says so in
    its reason (`Verdict.soft_errors`)."""
    base: _VerdictBase = {
        "task_id": transcript.task_id,
        "trial": transcript.trial,
        "checks": results,
        "score": _score(results),
    }
    if (failure := transcript.agent_failure()) is not None:  # the agent's own failure
        return Verdict(**base, outcome="fail", reason=failure)
    if transcript.error is not None:
        return Verdict(
            **base,
            outcome="error",
            error_side=transcript.error.side,
            reason=transcript.error.message,
        )
    failed = [c for c in results if c.gates and c.outcome == "fail"]
    if failed:
        return Verdict(**base, outcome="fail", reason=_reasons(failed))
    errored = [c for c in results if c.gates and c.outcome == "error"]
    if errored:
        return Verdict(
            **base, outcome="error", error_side=error_side(errored), reason=_reasons(errored)
        )
    undecided = [c for c in results if c.undecided]
    if undecided:
        reason = f"all hard checks passed; soft checks could not decide: {_reasons(undecided)}"
        return Verdict(**base, outcome="pass", reason=reason)
    return Verdict(**base, outcome="pass", reason="all hard checks passed")


class _VerdictBase(TypedDict):
    """The fields every verdict of `decide` shares."""

    task_id: str
    trial: int
    checks: list[CheckResult]
    score: float


def _reasons(results: list[CheckResult]) -> str:
    return "; ".join(f"{c.name}: {c.reason}" for c in results)


def _score(results: list[CheckResult]) -> float:
    """Weighted mean score of the non-diagnostic checks that decided."""
    counted = [c for c in results if not c.diagnostic and c.outcome != "error"]
    total = sum(c.weight for c in counted)
    return round(sum(c.score * c.weight for c in counted) / total, 4) if total else 0.0

"""Rule checks and normative verdicts, on hand-built transcripts."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest
from pydantic import TypeAdapter

from harness.grading.checks import CheckContext, register_check, run_check
from harness.grading.normative import decide, grade
from harness.specs.checks import Check, CheckBase
from harness.specs.task import Task
from harness.transcript import EndReason, EpisodeError, Message, Side, ToolCall, Transcript

CHECK = TypeAdapter(Check)


def check(spec, transcript_=None):
    """Run one check against the standard transcript (or another)."""
    context = CheckContext(task({"kind": "text", "contains": "x"}))
    return asyncio.run(run_check(spec, transcript_ or transcript(), context))


def transcript(**changes) -> Transcript:
    base = dict(
        task_id="t",
        variant="v",
        variant_hash="h",
        end_reason=EndReason.USER_STOP,
        messages=[
            Message(role="user", content="refund O-1 please"),
            Message(
                role="assistant",
                tool_calls=[
                    ToolCall(id="1", name="get_order", arguments={"order_id": "O-1"}),
                    ToolCall(id="2", name="get_order", arguments={"order_id": "O-2"}),
                ],
            ),
            Message(role="tool", tool_call_id="1", name="get_order", content="{}"),
            Message(role="assistant", content="Refund of $59.00 issued."),
            Message(role="user", content="thanks ###STOP###"),
            Message(role="assistant", content="Goodbye!"),
        ],
        final_state={"orders": {"O-1": {"status": "refunded", "items": [1, 2]}}, "refunds": [1]},
    )
    return Transcript(**{**base, **changes})


@pytest.mark.parametrize(
    ("spec", "outcome", "reason"),
    [
        (
            {"kind": "state", "expect": {"orders": {"O-1": {"status": "refunded"}}}},
            "pass",
            "final state matches",
        ),
        (
            {"kind": "state", "expect": {"orders": {"O-1": {"status": "delivered"}}}},
            "fail",
            "orders.O-1.status: expected 'delivered', found 'refunded'",
        ),
        (
            {
                "kind": "state",
                "expect": {"orders": {"O-2": {"status": "x"}, "O-1": {"items": [1]}}},
            },
            "fail",
            "orders.O-2: missing (expected {'status': 'x'}) (+1 more)",
        ),
        (
            {"kind": "tool_called", "tool": "get_order"},
            "pass",
            "get_order called 2 time(s), expected >= 1",
        ),
        (
            {
                "kind": "tool_called",
                "tool": "get_order",
                "args": {"order_id": "O-1"},
                "max_count": 1,
            },
            "pass",
            "get_order with {'order_id': 'O-1'} called 1 time(s), expected 1..1",
        ),
        (
            {"kind": "tool_called", "tool": "get_order", "args": {"order_id": "O-3"}},
            "fail",
            "get_order with {'order_id': 'O-3'} called 0 time(s), expected >= 1; "
            "other calls had {'order_id': 'O-1'}",
        ),
        (
            {"kind": "tool_called", "tool": "issue_refund", "min_count": 0, "max_count": 0},
            "pass",
            "issue_refund called 0 time(s), expected 0..0",
        ),
        (
            {"kind": "tool_called", "tool": "get_order", "max_count": 1},
            "fail",
            "get_order called 2 time(s), expected 1..1",
        ),
        (
            {"kind": "text", "contains": "REFUND OF"},
            "pass",
            "'REFUND OF' found in the agent's replies",
        ),
        (
            {"kind": "text", "contains": "REFUND OF", "ignore_case": False},
            "fail",
            "'REFUND OF' not found in the agent's replies",
        ),
        (
            {"kind": "text", "regex": r"\$\d+\.\d\d", "scope": "final"},
            "fail",
            r"/\$\d+\.\d\d/ not found in the final reply",
        ),
        (
            {"kind": "text", "contains": "sorry", "negate": True},
            "pass",
            "'sorry' absent from the agent's replies",
        ),
        (
            {"kind": "text", "regex": "good ?bye", "negate": True},
            "fail",
            "/good ?bye/ found in the agent's replies: 'Goodbye!'",
        ),
    ],
)
def test_rule_check(spec: dict, outcome: str, reason: str) -> None:
    result = check(CHECK.validate_python(spec))
    assert (result.outcome, result.reason) == (outcome, reason)
    assert result.score == (1.0 if outcome == "pass" else 0.0)


def task(*checks: dict) -> Task:
    return Task.model_validate(
        {
            "kind": "task",
            "id": "t",
            "title": "t",
            "level": 1,
            "domain": "support",
            "persona": "polite",
            "scenario": {"reason": "r"},
            "checks": list(checks),
        }
    )


PASSING = {"kind": "text", "contains": "refund"}
FAILING = {"kind": "text", "contains": "voucher"}


def test_verdict_needs_every_hard_check_and_scores_the_soft_ones() -> None:
    verdict = asyncio.run(
        grade(transcript(), CheckContext(task(PASSING, {**FAILING, "hard": False, "weight": 3})))
    )
    assert verdict.outcome == "pass"
    assert verdict.score == 0.25
    verdict = asyncio.run(
        grade(transcript(), CheckContext(task(PASSING, FAILING, {**FAILING, "diagnostic": True})))
    )
    assert verdict.outcome == "fail"
    assert [c.name for c in verdict.failed_checks()] == ["text"]
    assert verdict.score == 0.5


def test_an_episode_error_is_an_error_verdict_never_a_fail() -> None:
    broken = transcript(
        end_reason=EndReason.ERROR,
        error=EpisodeError(side=Side.USER_SIMULATOR, message="no rule matches"),
    )
    verdict = asyncio.run(grade(broken, CheckContext(task(FAILING))))
    assert verdict.outcome == "error"
    assert verdict.error_side == Side.USER_SIMULATOR
    assert verdict.reason == "no rule matches"


class ExplodingCheck(CheckBase):
    kind: Literal["explode"] = "explode"


@register_check("explode")
def _explode(spec: ExplodingCheck, transcript: Transcript, context: CheckContext):
    raise KeyError("boom")


def test_a_check_that_crashes_is_an_error_result() -> None:
    result = check(ExplodingCheck())
    assert (result.outcome, result.score) == ("error", 0.0)
    assert result.reason == "check crashed: KeyError: 'boom'"


def test_an_undecided_hard_check_makes_an_error_verdict_unless_another_fails() -> None:
    crashed = check(ExplodingCheck())
    passed = check(CHECK.validate_python(PASSING))
    failed = check(CHECK.validate_python(FAILING))
    verdict = decide(transcript(), [passed, crashed])
    assert (verdict.outcome, verdict.error_side) == ("error", Side.CHECKER)
    assert verdict.reason == "explode: check crashed: KeyError: 'boom'"
    assert decide(transcript(), [failed, crashed]).outcome == "fail"
    soft_crash = crashed.model_copy(update={"hard": False})
    assert decide(transcript(), [passed, soft_crash]).outcome == "pass"

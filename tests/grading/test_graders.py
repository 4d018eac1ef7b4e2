"""The richer check kinds, the LLM judge and the pairwise relative judge."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import TypeAdapter

from harness.grading.checks import CheckContext, run_check
from harness.grading.normative import grade
from harness.grading.relative import compare_pair
from harness.models import ModelRuntime
from harness.models.scripted import ScriptedModel
from harness.specs.agent import ModelRef
from harness.specs.checks import Check
from harness.specs.script import Script
from harness.specs.task import Task
from harness.transcript import EndReason, Message, Side, ToolCall, Transcript

CHECK = TypeAdapter(Check)
JUDGE = ModelRef(id="scripted", script="agents/scripts/judge.yaml")


def transcript(
    final: str = "Done.",
    state: dict | None = None,
    trial: int = 0,
    calls: tuple[tuple[str, dict], ...] = (),
) -> Transcript:
    messages = [Message(role="user", content="Please help with order O-1.")]
    for index, (name, arguments) in enumerate(calls):
        messages += [
            Message(
                role="assistant",
                tool_calls=[ToolCall(id=f"c{index}", name=name, arguments=arguments)],
            ),
            Message(role="tool", tool_call_id=f"c{index}", name=name, content="{}"),
        ]
    messages.append(Message(role="assistant", content=final))
    return Transcript(
        task_id="t",
        variant="v",
        variant_hash="h",
        trial=trial,
        end_reason=EndReason.USER_STOP,
        messages=messages,
        final_state=state or {},
    )


def task(*checks: dict) -> Task:
    return Task.model_validate(
        {
            "kind": "task",
            "id": "t",
            "title": "t",
            "level": 1,
            "domain": "support",
            "persona": "polite",
            "scenario": {"reason": "A refund for O-1.", "instructions": "Answer in one sentence."},
            "checks": list(checks) or [{"kind": "text", "contains": "x"}],
        }
    )


def run(spec: dict, episode: Transcript, judge: ModelRef | None = JUDGE):
    context = CheckContext(task(), ModelRuntime(), judge)
    return asyncio.run(run_check(CHECK.validate_python(spec), episode, context))


STATE = {
    "orders": {"O-1": {"status": "refunded"}, "O-2": {"status": "shipped"}},
    "refunds": [{"order_id": "O-1", "amount": 59.0}],
}
CALLS = (("get_order", {"order_id": "O-1"}), ("issue_refund", {"order_id": "O-1", "reason": "r"}))


@pytest.mark.parametrize(
    ("spec", "episode", "outcome", "reason"),
    [
        (
            {"kind": "state", "path": "$.refunds[?order_id = 'O-1'].amount", "equals": 59.0},
            transcript(state=STATE),
            "pass",
            "$.refunds[?order_id = 'O-1'].amount == 59.0",
        ),
        (
            {"kind": "state", "path": "$.orders.*.status", "equals": "refunded"},
            transcript(state=STATE),
            "fail",
            "$.orders.*.status: expected 'refunded', found 'shipped'",
        ),
        (
            {"kind": "state", "path": "$.refunds[?order_id = 'O-2']", "exists": False},
            transcript(state=STATE),
            "pass",
            "$.refunds[?order_id = 'O-2'] selects nothing",
        ),
        (
            {"kind": "state", "path": "$.handoffs[0]", "exists": True},
            transcript(state=STATE),
            "fail",
            "$.handoffs[0] selects nothing",
        ),
        (
            {"kind": "tool_order", "tools": ["get_order", "issue_refund"]},
            transcript(calls=CALLS),
            "pass",
            "get_order -> issue_refund in order",
        ),
        (
            {"kind": "tool_order", "tools": ["issue_refund", "get_order"]},
            transcript(calls=CALLS),
            "fail",
            "no get_order after issue_refund; calls were ['get_order', 'issue_refund']",
        ),
        (
            {"kind": "json_schema", "schema": {"type": "object", "required": ["order_id"]}},
            transcript('Here you go:\n```json\n{"order_id": "O-1"}\n```'),
            "pass",
            "1 document(s) valid",
        ),
        (
            {"kind": "json_schema", "schema": {"type": "object", "required": ["order_id"]}},
            transcript('{"id": 1}'),
            "fail",
            "the final reply at root: 'order_id' is a required property",
        ),
        (
            {"kind": "json_schema", "schema": {"type": "object"}},
            transcript("no json here"),
            "fail",
            "the final reply holds no JSON",
        ),
        (
            {
                "kind": "json_schema",
                "target": "tool_arguments",
                "tool": "issue_refund",
                "schema": {"type": "object", "properties": {"reason": {"minLength": 5}}},
            },
            transcript(calls=CALLS),
            "fail",
            "issue_refund call 1 at reason: 'r' is too short",
        ),
        (
            {
                "kind": "json_schema",
                "target": "tool_arguments",
                "tool": "cancel_order",
                "schema": {"type": "object"},
            },
            transcript(calls=CALLS),
            "fail",
            "cancel_order was never called",
        ),
    ],
)
def test_rule_check_kinds(spec: dict, episode: Transcript, outcome: str, reason: str) -> None:
    result = run(spec, episode)
    assert (result.outcome, result.reason) == (outcome, reason)


@pytest.mark.parametrize(
    ("code", "outcome", "score", "reason"),
    [
        (
            "def check(t):\n    return t['final_state']['refunds'][0]['amount'] == 59.0",
            "pass",
            1.0,
            "checker returned True",
        ),
        (
            "def check(t):\n    return False, 'no refund mentioned'",
            "fail",
            0.0,
            "no refund mentioned",
        ),
        ("def check(t):\n    return 0.5", "fail", 0.5, "score 0.5 (threshold 1)"),
        (
            "def check(t):\n    return 'maybe'",
            "error",
            0.0,
            "checker returned 'maybe'; expected a bool, a score in [0, 1], or (bool or score, "
            "reason)",
        ),
        (
            "def check(t):\n    return 1 / 0",
            "error",
            0.0,
            "checker failed: ZeroDivisionError: division by zero",
        ),
    ],
)
def test_python_checks(code: str, outcome: str, score: float, reason: str) -> None:
    result = run({"kind": "python", "code": code}, transcript(state=STATE))
    assert (result.outcome, result.score, result.reason) == (outcome, score, reason)
    assert result.error_side == (Side.CHECKER if outcome == "error" else None)


def test_verinstruct_style_checker_gets_instruction_and_final_reply() -> None:
    code = (
        "def check_following(instruction, response):\n"
        "    return instruction == 'Answer in one sentence.' and response.count('.') == 1"
    )
    spec = {"kind": "python", "code": code, "function": "check_following"}
    assert run(spec, transcript("Refunded.")).outcome == "pass"
    assert run(spec, transcript("Refunded. Bye.")).outcome == "fail"


def test_judge_decides_with_its_reasoning() -> None:
    spec = {"kind": "llm_judge", "criterion": "The agent explains why the refund cannot be made."}
    passed = run(spec, transcript("It is outside our 30-day refund window."))
    assert (passed.outcome, passed.reason) == ("pass", "The agent states the 30-day refund window.")
    failed = run(spec, transcript("No."))
    assert (failed.outcome, failed.reason) == ("fail", "No reason rooted in the policy was given.")


def test_judge_garbage_is_retried_then_an_error_never_a_fail() -> None:
    spec = {"kind": "llm_judge", "criterion": "The agent is friendly.", "retries": 2}
    result = run(spec, transcript())
    assert result.outcome == "error" and result.error_side == Side.JUDGE
    assert result.reason == (
        "judge: no valid judgement after 3 attempts; last reply: 'I am not "
        "sure what to say about this conversation.'"
    )
    verdict = asyncio.run(
        grade(
            transcript(),
            CheckContext(
                task(
                    {"kind": "text", "contains": "Done"},
                    {"kind": "llm_judge", "criterion": "The agent is friendly."},
                ),
                ModelRuntime(),
                JUDGE,
            ),
        )
    )
    assert (verdict.outcome, verdict.error_side) == ("error", Side.JUDGE)


def test_a_failed_judge_model_is_a_judge_error() -> None:
    spec = {"kind": "llm_judge", "criterion": "Anything.", "model": "nosuch/model"}
    result = run(spec, transcript())
    assert result.outcome == "error" and result.error_side == Side.JUDGE
    assert "unknown model provider 'nosuch'" in result.reason
    assert run({"kind": "llm_judge", "criterion": "x"}, transcript(), judge=None).reason == (
        "no judge model: pass --judge-model, set judge_model in harness.yaml, or give the "
        "check a model"
    )


def judge_model() -> ScriptedModel:
    from pathlib import Path

    from harness.specs.load import load_script

    return ScriptedModel(load_script(Path("agents/scripts/judge.yaml")).spec)


def test_pairwise_judge_agrees_in_both_orders() -> None:
    good = transcript("Sorry, that is outside our 30-day refund window.")
    bad = transcript("Sorry, something went wrong.")
    verdict = asyncio.run(compare_pair(task(), good, bad, judge_model()))
    assert verdict.winner == "a"
    assert asyncio.run(compare_pair(task(), bad, good, judge_model())).winner == "b"
    assert asyncio.run(compare_pair(task(), bad, bad, judge_model())).winner == "tie"


def test_swapped_order_disagreement_is_a_tie() -> None:
    always_first = ScriptedModel(
        Script.model_validate(
            {
                "kind": "script",
                "rules": [
                    {"reply": '{"reasoning": "The first one, whichever it is.", "better": "1"}'}
                ],
            }
        )
    )
    verdict = asyncio.run(compare_pair(task(), transcript("A"), transcript("B"), always_first))
    assert verdict.winner == "tie"
    assert verdict.a_first == verdict.b_first == "The first one, whichever it is."


def test_pairwise_judge_garbage_is_an_error_and_pairs_must_match() -> None:
    mumbler = ScriptedModel(Script.model_validate({"kind": "script", "rules": [{"reply": "hmm"}]}))
    verdict = asyncio.run(compare_pair(task(), transcript(), transcript(), mumbler))
    assert verdict.winner is None and "no valid judgement" in verdict.error
    with pytest.raises(ValueError, match="not a pair"):
        asyncio.run(compare_pair(task(), transcript(trial=0), transcript(trial=1), mumbler))


class Incomparable:
    """A value no check can compare, standing for a corrupted record."""

    def __eq__(self, other: object) -> bool:
        raise TypeError("cannot compare")

    __ne__ = __eq__
    __hash__ = None  # type: ignore[assignment]


@pytest.mark.parametrize(
    "spec",
    [
        {"kind": "text", "contains": "x"},
        {"kind": "tool_called", "tool": "get_order"},
        {"kind": "tool_order", "tools": ["get_order", "issue_refund"]},
        {"kind": "json_schema", "schema": {"type": "object"}},
        {"kind": "state", "expect": {"orders": 1}},
        {"kind": "state", "path": "$.orders", "equals": 1},
    ],
    ids=lambda spec: spec["kind"],
)
def test_every_rule_kind_reports_an_error_when_it_cannot_decide(spec: dict) -> None:
    corrupted = Transcript.model_construct(
        task_id="t",
        trial=0,
        messages=None,
        final_state={"orders": Incomparable()},
        end_reason=EndReason.USER_STOP,
        error=None,
    )
    result = run(spec, corrupted)
    assert result.outcome == "error" and result.error_side == Side.CHECKER
    assert result.reason.startswith("check crashed: TypeError")

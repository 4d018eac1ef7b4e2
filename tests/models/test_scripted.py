"""The `scripted` model: rules, conditions and templates."""

from __future__ import annotations

import asyncio

import pytest

from harness.models import CompletionParams, ModelError, create_model
from harness.models.scripted import ScriptedModel
from harness.specs.script import Script
from harness.transcript import Message, ToolCall


def script(*rules: dict) -> ScriptedModel:
    return ScriptedModel(
        Script.model_validate({"kind": "script", "rules": list(rules)}),
        {"known": {"email": "a@b.c"}},
    )


def user(text: str) -> Message:
    return Message(role="user", content=text)


def tool_result(name: str, content: str, error: bool = False) -> list[Message]:
    return [
        Message(role="assistant", tool_calls=[ToolCall(id="c1", name=name, arguments={"x": 1})]),
        Message(role="tool", tool_call_id="c1", name=name, content=content, is_error=error),
    ]


def test_regex_groups_fill_tool_arguments_and_keep_types() -> None:
    model = script(
        {
            "when": {"user": r"order (?P<id>O-\d+)"},
            "reply": {"tool_calls": [{"name": "get_order", "arguments": {"order_id": "{u.id}"}}]},
        },
    )
    reply = model.reply([user("where is order O-7?")])
    assert reply.tool_calls == [
        ToolCall(id="call_0", name="get_order", arguments={"order_id": "O-7"})
    ]
    model = script(
        {
            "when": {"tool": "t"},
            "reply": {
                "tool_calls": [
                    {
                        "name": "pay",
                        "arguments": {"amount": "{result.total}", "note": "total {result.total}"},
                    }
                ]
            },
        }
    )
    call = model.reply([user("hi"), *tool_result("t", '{"total": 59.0}')]).tool_calls[0]
    assert call.id == "call_1"
    assert call.arguments == {"amount": 59.0, "note": "total 59.00"}


def test_a_rule_whose_template_cannot_be_filled_is_skipped() -> None:
    model = script(
        {"reply": "My order is {known.order_id}."}, {"reply": "My email is {known.email}."}
    )
    assert model.reply([user("hello")]).content == "My email is a@b.c."


def test_system_prompt_and_history_conditions() -> None:
    model = script(
        {"when": {"system": "(?i)be formal"}, "reply": "Good day."},
        {"when": {"history": r"(O-\d+)"}, "reply": "About {h.1}?"},
        {"reply": "Hi."},
    )
    system = Message(role="system", content="Please BE FORMAL.")
    assert model.reply([system, user("hey")]).content == "Good day."
    assert model.reply([user("O-3 broke"), user("hey")]).content == "About O-3?"
    assert model.reply([user("hey")]).content == "Hi."


def test_tool_rules_answer_only_tool_results() -> None:
    model = script(
        {"when": {"tool": "get_order", "error": True}, "reply": "Failed: {text}"},
        {
            "when": {"tool": "get_order", "result": {"status": "shipped"}},
            "reply": "Shipped {args.x}",
        },
        {"reply": "Talk to me."},
    )
    assert model.reply([user("hi")]).content == "Talk to me."
    shipped = tool_result("get_order", '{"status": "shipped"}')
    assert model.reply([user("hi"), *shipped]).content == "Shipped 1"
    failed = tool_result("get_order", "Error: nope", error=True)
    assert model.reply([user("hi"), *failed]).content == "Failed: Error: nope"
    with pytest.raises(ModelError, match="no rule matches the last tool message"):
        model.reply([user("hi"), *tool_result("get_order", '{"status": "lost"}')])


def test_complete_counts_usage_and_loads_scripts_by_reference() -> None:
    model = create_model({"id": "scripted", "script": "agents/scripts/support.yaml"})
    completion = asyncio.run(
        model.complete([user("where is my order O-1002?")], [], CompletionParams())
    )
    assert completion.message.tool_calls[0].arguments == {"order_id": "O-1002"}
    assert completion.usage.calls == 1 and completion.usage.input_tokens == 5
    assert completion.model == "scripted:support"


def test_unknown_provider_is_a_model_error() -> None:
    with pytest.raises(ModelError, match="unknown model provider 'nosuch'"):
        create_model("nosuch/model-1")

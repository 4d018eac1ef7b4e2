"""The embedded offline model: tool-call parsing and checksum (always), its published file and a
live call on CPU (marked local_model: README's local-model command runs them)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from harness.domains import get_domain
from harness.models import CompletionParams, ModelError, ModelRuntime
from harness.models.local import BUNDLED, locate, parse_tool_calls, sha256_of
from harness.transcript import Message, ToolCall

TOOLS = get_domain("support").tool_specs(["get_order", "issue_refund"])
# Opt-in (pyproject's addopts deselect it): README's local-model command installs the `local`
# extra, compiled from source, and runs these with `-m local_model`; there a missing extra fails
# with the install hint rather than skipping, so that command cannot pass without the model.
needs_local = pytest.mark.local_model


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        (
            '<tool_call>{"name": "get_order", "arguments": {"order_id": "O-1"}}</tool_call>',
            "",
            [("get_order", {"order_id": "O-1"})],
        ),
        (
            'Sure. <tool_call>{"name": "get_order", "arguments": {"order_id": "O-1"}}</tool_call>'
            '<tool_call>{"name": "issue_refund", "parameters": {"order_id": "O-1", "reason": "x"}}',
            "Sure.",
            [
                ("get_order", {"order_id": "O-1"}),
                ("issue_refund", {"order_id": "O-1", "reason": "x"}),
            ],
        ),
        (
            '```json\n{"name": "get_order", "arguments": "{\\"order_id\\": \\"O-2\\"}"}\n```',
            "",
            [("get_order", {"order_id": "O-2"})],
        ),
        (
            'I will look it up: {"name": "get_order", "arguments": {"order_id": "O-3"}}',
            "I will look it up:",
            [("get_order", {"order_id": "O-3"})],
        ),
        ('{"name": "delete_all", "arguments": {}}', '{"name": "delete_all", "arguments": {}}', []),
        ("<tool_call>{not json}</tool_call>", "", []),
        ("Your order has shipped.", "Your order has shipped.", []),
    ],
)
def test_tool_call_text_becomes_structured_calls(text: str, content: str, calls: list) -> None:
    message = parse_tool_calls(text, TOOLS, first_id=4)
    assert message.content == content
    assert [(c.name, c.arguments) for c in message.tool_calls] == calls
    assert [c.id for c in message.tool_calls] == [f"call_{4 + i}" for i in range(len(calls))]


def test_a_file_that_fails_its_checksum_is_never_loaded(tmp_path: Path) -> None:
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"GGUF not really a model")
    model = ModelRuntime().model({"id": f"local/{fake}", "sha256": "0" * 64}, "agent")
    with pytest.raises(ModelError, match="fails its checksum"):
        asyncio.run(model.complete([Message(role="user", content="hi")], [], CompletionParams()))


def test_unknown_local_name_is_a_clear_error() -> None:
    with pytest.raises(ModelError, match=r"local/giant: unknown local model; use one of smollm2"):
        ModelRuntime().model("local/giant", "agent")


@needs_local
def test_bundled_model_file_has_its_published_checksum() -> None:
    path, expected = locate("smollm2")
    assert expected == BUNDLED["smollm2"][2]
    assert sha256_of(path) == expected


@needs_local
def test_embedded_model_answers_offline_and_its_tool_calls_are_parsed() -> None:
    model = ModelRuntime().model("local/smollm2", "agent")
    params = CompletionParams(max_tokens=60, temperature=0)

    async def conversation():
        hello = await model.complete(
            [Message(role="user", content="Say hello to the customer.")], [], params
        )
        copied = await model.complete(
            [
                Message(role="system", content="Copy the user's message exactly."),
                Message(
                    role="user",
                    content='Repeat exactly: <tool_call>{"name": "get_order", '
                    '"arguments": {"order_id": "O-1002"}}</tool_call>',
                ),
            ],
            TOOLS[:1],
            params,
        )
        return hello, copied

    hello, copied = asyncio.run(conversation())
    assert hello.message.content.strip() and not hello.message.tool_calls
    assert hello.usage.input_tokens > 0 and hello.usage.output_tokens > 0
    assert hello.usage.cost_usd == 0
    assert copied.message.tool_calls == [
        ToolCall(id="call_0", name="get_order", arguments={"order_id": "O-1002"})
    ]

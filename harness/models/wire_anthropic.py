"""The Anthropic messages wire format, both ways: a separate system prompt, `tool_use` blocks in
assistant turns, `tool_result` blocks in user turns, and strictly alternating roles."""

from __future__ import annotations

from typing import Any

from harness.transcript import Message, ToolCall, ToolSpec, Usage


def to_wire(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """Internal messages as Anthropic `(system, messages)`; consecutive turns of one role merge."""
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    wire: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        blocks: list[dict[str, Any]] = []
        if message.role == "tool":
            role = "user"
            blocks.append(
                {
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id,
                    "content": message.content,
                    "is_error": message.is_error,
                }
            )
        else:
            role = message.role
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            blocks.extend(
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                for c in message.tool_calls
            )
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    return system, wire


def to_wire_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
    ]


def message_from_response(content: list[Any]) -> Message:
    """The internal message of an SDK response's content blocks (attribute access)."""
    text = "".join(block.text for block in content if block.type == "text")
    calls = [
        ToolCall(id=block.id, name=block.name, arguments=dict(block.input or {}))
        for block in content
        if block.type == "tool_use"
    ]
    return Message(role="assistant", content=text, tool_calls=calls)


def usage_from_response(usage: Any) -> Usage:
    return Usage(
        calls=1, input_tokens=usage.input_tokens or 0, output_tokens=usage.output_tokens or 0
    )


# ---------------------------------------------------------------- server side


def _blocks(content: Any) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def from_wire(system: Any, wire: list[dict[str, Any]]) -> list[Message]:
    """Anthropic `(system, messages)` as internal messages."""
    messages: list[Message] = []
    if system:
        text = system if isinstance(system, str) else "".join(b.get("text", "") for b in system)
        messages.append(Message(role="system", content=text))
    names: dict[str, str] = {}
    for item in wire:
        blocks = _blocks(item["content"])
        text = "".join(b.get("text", "") for b in blocks if b["type"] == "text")
        if item["role"] == "assistant":
            calls = [
                ToolCall(id=b["id"], name=b["name"], arguments=b.get("input") or {})
                for b in blocks
                if b["type"] == "tool_use"
            ]
            names.update({c.id: c.name for c in calls})
            messages.append(Message(role="assistant", content=text, tool_calls=calls))
            continue
        for block in blocks:
            if block["type"] == "tool_result":
                result = block.get("content") or ""
                if isinstance(result, list):
                    result = "".join(part.get("text", "") for part in result)
                messages.append(
                    Message(
                        role="tool",
                        content=result,
                        tool_call_id=block["tool_use_id"],
                        name=names.get(block["tool_use_id"]),
                        is_error=bool(block.get("is_error")),
                    )
                )
        if text:
            messages.append(Message(role="user", content=text))
    return messages


def from_wire_tools(tools: list[dict[str, Any]] | None) -> list[ToolSpec]:
    return [
        ToolSpec(
            name=t["name"],
            description=t.get("description", ""),
            parameters=t.get("input_schema") or {"type": "object"},
        )
        for t in tools or []
    ]


def response_body(message: Message, usage: Usage, model: str, response_id: str) -> dict[str, Any]:
    """A messages-API response for an internal assistant message."""
    _, [turn] = to_wire([message])
    return {
        "id": response_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": turn["content"],
        "stop_reason": "tool_use" if message.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
    }

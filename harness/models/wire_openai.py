"""The OpenAI chat-completions wire format, both ways.

Client side: internal messages and tools become request dicts, a response's message becomes an
internal `Message`. Server side (the test server): the reverse.
"""

from __future__ import annotations

import json
from typing import Any

from harness.transcript import Message, ToolCall, ToolSpec, Usage


def to_wire_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Internal messages as OpenAI `messages`."""
    wire: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            wire.append(
                {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
            )
        elif message.role == "assistant" and message.tool_calls:
            wire.append(
                {
                    "role": "assistant",
                    "content": message.content or None,
                    "tool_calls": [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {
                                "name": call.name,
                                "arguments": json.dumps(call.arguments),
                            },
                        }
                        for call in message.tool_calls
                    ],
                }
            )
        else:
            wire.append({"role": message.role, "content": message.content})
    return wire


def to_wire_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as OpenAI `tools`."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


def decode_arguments(text: str | None) -> dict[str, Any]:
    """Tool-call arguments from their JSON text. Malformed arguments are kept, not dropped, so the
    environment can refuse them and the agent sees its own mistake."""
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {"__invalid_json__": text}
    return value if isinstance(value, dict) else {"__invalid_json__": text}


def message_from_response(message: Any) -> Message:
    """The internal message of an SDK `ChatCompletionMessage` (attribute access)."""
    calls = [
        ToolCall(
            id=call.id, name=call.function.name, arguments=decode_arguments(call.function.arguments)
        )
        for call in (message.tool_calls or [])
    ]
    return Message(role="assistant", content=message.content or "", tool_calls=calls)


def usage_from_response(usage: Any) -> Usage:
    if usage is None:
        return Usage(calls=1)
    return Usage(
        calls=1, input_tokens=usage.prompt_tokens or 0, output_tokens=usage.completion_tokens or 0
    )


# ---------------------------------------------------------------- server side


def from_wire_messages(wire: list[dict[str, Any]]) -> list[Message]:
    """OpenAI `messages` as internal messages."""
    messages = []
    names: dict[str, str] = {}
    for item in wire:
        role, content = item["role"], item.get("content") or ""
        if isinstance(content, list):  # content parts: keep the text ones
            content = "".join(part.get("text", "") for part in content)
        if role == "developer":
            role = "system"
        if role == "tool":
            call_id = item.get("tool_call_id")
            messages.append(
                Message(
                    role="tool",
                    content=content,
                    tool_call_id=call_id,
                    name=names.get(call_id or ""),
                )
            )
            continue
        calls = [
            ToolCall(
                id=c["id"],
                name=c["function"]["name"],
                arguments=decode_arguments(c["function"].get("arguments")),
            )
            for c in item.get("tool_calls") or []
        ]
        names.update({call.id: call.name for call in calls})
        messages.append(Message(role=role, content=content, tool_calls=calls))
    return messages


def from_wire_tools(tools: list[dict[str, Any]] | None) -> list[ToolSpec]:
    return [
        ToolSpec(
            name=t["function"]["name"],
            description=t["function"].get("description", ""),
            parameters=t["function"].get("parameters") or {"type": "object"},
        )
        for t in tools or []
    ]


def response_body(message: Message, usage: Usage, model: str, response_id: str) -> dict[str, Any]:
    """A chat-completion response for an internal assistant message."""
    wire = to_wire_messages([message])[0]
    return {
        "id": response_id,
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": wire,
                "finish_reason": "tool_calls" if message.tool_calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens,
        },
    }

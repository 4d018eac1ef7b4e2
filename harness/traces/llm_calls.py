"""Apps whose model calls weave patched automatically (OpenAI chat completions, Anthropic
messages): the conversation is the merge of the calls' histories, the tools are those the calls
offered, and the tool ops are the calls named after an offered tool.

Each call sends the history the app kept; consecutive histories overlap (an app that keeps the
whole conversation) or start afresh (an app that sends only the latest turn), so each history
adds what follows its overlap with the messages seen so far, then the call's reply.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from harness.models import wire_anthropic, wire_openai
from harness.traces.calls import CallRecord
from harness.transcript import Message, ToolSpec

OPENAI_OPS = ("openai.chat.completions.create", "openai.chat.completions.parse")
ANTHROPIC_OPS = (
    "anthropic.Messages.create",
    "anthropic.messages.create",
    "anthropic.AsyncMessages.create",
    "Messages.create",
)
NOT_JSON = "__invalid_json__"  # what the wire decoders put for arguments that are not JSON


def is_llm(call: CallRecord) -> bool:
    return call.op.startswith(OPENAI_OPS + ANTHROPIC_OPS) or call.kind == "llm"


def _is_anthropic(call: CallRecord) -> bool:
    return call.op.startswith(ANTHROPIC_OPS) or "system" in call.inputs


def history(call: CallRecord) -> list[Message]:
    """The messages a model call was sent, without the system prompt; ValueError (or a
    KeyError, TypeError) when they are not a list of chat messages."""
    sent = call.inputs.get("messages")
    if not isinstance(sent, list):
        raise ValueError(f"its `messages` input is {type(sent).__name__}, not a list")
    if _is_anthropic(call):
        messages = wire_anthropic.from_wire(call.inputs.get("system"), sent)
    else:
        messages = wire_openai.from_wire_messages(sent)
    return [m for m in messages if m.role != "system"]


def reply(call: CallRecord) -> list[Message]:
    """The message a model call answered with (none when it raised or has no output)."""
    output = call.output
    if call.error() is not None or not isinstance(output, dict):
        return []
    if "choices" in output:
        return wire_openai.from_wire_messages([output["choices"][0]["message"]])
    if "content" in output:
        return wire_anthropic.from_wire(None, [{"role": "assistant", "content": output["content"]}])
    raise ValueError("its output has neither `choices` nor `content`")


def offered_tools(calls: list[CallRecord]) -> list[ToolSpec]:
    """The tools the model calls offered (first description of each name wins)."""
    found: dict[str, ToolSpec] = {}
    for call in calls:
        tools = call.inputs.get("tools")
        if not isinstance(tools, list) or not tools:
            continue
        wire = wire_anthropic if _is_anthropic(call) and "function" not in tools[0] else wire_openai
        for spec in wire.from_wire_tools(tools):
            found.setdefault(spec.name, spec)
    return list(found.values())


def _key(message: Message) -> tuple[Any, ...]:
    calls = tuple((c.name, json.dumps(c.arguments, sort_keys=True)) for c in message.tool_calls)
    return message.role, message.content.strip(), calls


def merge(seen: list[Message], new: list[Message]) -> list[Message]:
    """What `new` (a history) adds to `seen`: what follows the longest end of `seen` that `new`
    starts with; all of `new` when they share nothing (a fresh context)."""
    if not seen:
        return new
    seen_keys, new_keys = [_key(m) for m in seen], [_key(m) for m in new]
    for size in range(min(len(seen), len(new)), 0, -1):
        if seen_keys[-size:] == new_keys[:size]:
            return new[size:]
    return new


def conversation_messages(
    llm: list[CallRecord], report: Callable[[CallRecord, str], None]
) -> list[Message]:
    """The conversation the model calls saw and said, in order; a call of an unknown shape, or
    a tool call whose arguments are not a JSON object, is reported (the call is left out; the
    arguments stay marked with `NOT_JSON`, see `readable`)."""
    messages: list[Message] = []
    for call in llm:
        try:
            sent, answered = history(call), reply(call)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            report(call, f"model call of an unknown shape ({type(exc).__name__}: {exc})")
            continue
        added = merge(messages, sent) + answered
        for tool_call in (c for m in added for c in m.tool_calls):
            if NOT_JSON in tool_call.arguments:
                text = str(tool_call.arguments[NOT_JSON])[:60]
                report(
                    call, f"tool call {tool_call.name}: arguments are not a JSON object: {text!r}"
                )
        messages += added
    return messages


def readable(messages: list[Message]) -> None:
    """Empty the arguments that were not a JSON object (once they can no longer be replayed)."""
    for tool_call in (c for m in messages for c in m.tool_calls):
        if NOT_JSON in tool_call.arguments:
            tool_call.arguments = {}

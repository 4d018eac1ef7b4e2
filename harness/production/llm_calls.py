"""Apps whose model calls weave patched automatically (OpenAI chat completions, Anthropic
messages): the conversation is the merge of the calls' histories, the tools are those the calls
offered, and the tool ops are the calls named after an offered tool.

Only the main agent's calls count (`main_calls`: a sub-agent's call, with its own system prompt,
is no conversation with the user). Each call sends the history the app kept, which may be the
whole conversation with its tool calls, the visible texts only, or the latest turn alone; so a
user turn is what a call's history adds to the user texts the previous call sent
(`new_user_turns`), and each call adds the tool results no earlier call saw and its reply.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

from harness.models import wire_anthropic, wire_openai
from harness.production.calls import CallRecord
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


def system_prompt(call: CallRecord) -> str:
    """The system prompt a model call was sent ("" when none)."""
    if _is_anthropic(call):
        system = call.inputs.get("system")
        if isinstance(system, list):
            return "".join(b.get("text", "") for b in system if isinstance(b, dict))
        return str(system or "")
    sent = call.inputs.get("messages")
    for message in sent if isinstance(sent, list) else []:
        if isinstance(message, dict) and message.get("role") in ("system", "developer"):
            content = message.get("content") or ""
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return str(content)
    return ""


def main_calls(llm: list[CallRecord]) -> list[CallRecord]:
    """The main agent's model calls: those sharing the session's main system prompt (the one
    of the calls that offer tools, else the most common). A sub-agent (a triage or summary
    step with its own prompt) makes calls the user never saw: its user message is not a turn."""
    prompts = [system_prompt(c) for c in llm]
    with_tools = [p for c, p in zip(llm, prompts, strict=True) if c.inputs.get("tools")]
    counted = Counter(with_tools or prompts)
    main = max(counted, key=lambda p: (counted[p], -prompts.index(p)))
    return [c for c, p in zip(llm, prompts, strict=True) if p == main]


def _key(message: Message) -> tuple[Any, ...]:
    calls = tuple((c.name, json.dumps(c.arguments, sort_keys=True)) for c in message.tool_calls)
    return message.role, message.content.strip(), calls


def new_user_turns(before: list[str], now: list[str]) -> list[str]:
    """What the user said since the previous model call: the user texts a call's history adds
    to the previous call's (an app that re-sends the conversation), or its newest one when the
    history starts afresh (an app that sends only the latest turn); none when the newest is the
    one already seen (a second call of the same turn, after tool results)."""
    if not now:
        return []
    if len(now) > len(before) and now[: len(before)] == before:
        return now[len(before) :]
    if before and now[-1] == before[-1]:
        return []
    return now[-1:]


def conversation_messages(
    llm: list[CallRecord], report: Callable[[CallRecord, str], None]
) -> list[Message]:
    """The conversation the main agent's model calls saw and said, in order: each user turn
    once (see `new_user_turns`), the tool results each call saw that no earlier one did, and
    each call's reply. A call of an unknown shape, or a tool call whose arguments are not a
    JSON object, is reported (the call is left out; the arguments stay marked with
    `NOT_JSON`, see `readable`)."""
    messages: list[Message] = []
    users: list[str] = []
    seen_results: set[str] = set()
    for call in llm:
        try:
            sent, answered = history(call), reply(call)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            report(call, f"model call of an unknown shape ({type(exc).__name__}: {exc})")
            continue
        said = [m.content.strip() for m in sent if m.role == "user" and m.content.strip()]
        added = [Message(role="user", content=text) for text in new_user_turns(users, said)]
        users = said
        last_user = max((i for i, m in enumerate(sent) if m.role == "user"), default=-1)
        ours = {_key(m) for m in messages[len(messages) - 40 :]}
        for message in sent[last_user + 1 :]:  # this turn's steps the calls so far did not say
            if message.role == "tool":
                if message.tool_call_id not in seen_results:
                    added.append(message)
            elif message.role == "assistant" and _key(message) not in ours:
                added.append(message)
        added += answered
        seen_results |= {m.tool_call_id for m in added if m.role == "tool" and m.tool_call_id}
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

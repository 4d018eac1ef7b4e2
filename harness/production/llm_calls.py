"""Apps whose model calls weave patched automatically (OpenAI chat completions, Anthropic
messages, and the OpenAI-shaped clients: litellm, groq, mistral, cerebras, ...): the conversation
is the merge of the calls' histories, the tools are those the calls offered, and the tool ops are
the calls named after an offered tool.

Only the main agent's calls count (`main_calls`: a sub-agent's call, with its own system prompt,
is no conversation with the user). Each call sends the history the app kept, which may be the
whole conversation with its tool calls, the visible texts only, or the latest turn alone; so a
user turn is what a call's history adds to the user texts the previous call sent
(`new_user_turns`), and each call adds the tool results no earlier call saw and its reply.

A reply is read from the call's output (as `harness.tracing.plain` reads weave's objects): an
OpenAI chat completion (`choices`), streamed or not, or an Anthropic message (`content` blocks),
created, streamed with `stream=True`, or through `messages.stream(...)`. weave 0.54 does not
always record a streamed Anthropic reply whole: `messages.create(stream=True)` keeps its text but
drops its `tool_use` blocks, and `messages.stream(...)` iterated (or read through `text_stream`)
records `""`. Such a reply is `LostReply`; the app usually sends it back in the history of its
next model call (the tool call with its result, the text before the next user turn), and it is
read from there (`_said_back`). A main-agent reply read nowhere makes the whole conversation
unreadable (`UnreadableReplies`): converted without it, a session would miss what the agent told
the user, and a failure (a "Done!" after a failed call) would become a silent success.
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
ANTHROPIC_OPS = (  # weave's op names (`anthropic.Messages.stream`, `anthropic.beta...`), older ones
    "anthropic.",
    "Messages.create",
    "Messages.stream",
    "AsyncMessages.create",
    "AsyncMessages.stream",
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


class LostReply(ValueError):
    """A model call that succeeded, but whose output does not hold its reply whole."""


class UnreadableReplies(ValueError):
    """Main-agent replies read neither from their calls' outputs nor from a later history."""

    def __init__(self, lost: list[tuple[CallRecord, str]]) -> None:
        self.lost = lost
        shown = "; ".join(f"call {c.id} ({c.op}): {why}" for c, why in lost[:3])
        more = f"; and {len(lost) - 3} more" if len(lost) > 3 else ""
        count = f"{len(lost)} model repl{'y' if len(lost) == 1 else 'ies'}"
        super().__init__(
            f"{count} of the agent cannot be read, so what it told the user is "
            f"unknown ({shown}{more}); not converted"
        )


def reply(call: CallRecord) -> list[Message]:
    """The message a model call answered with: none when it raised; `LostReply` when it
    succeeded but its output holds no reply, or not all of it (see the module's docstring)."""
    output = call.output
    if call.error() is not None:
        return []
    if isinstance(output, dict):
        if "choices" in output:
            return [_openai_reply(output)]
        if isinstance(output.get("content"), list):
            return [_anthropic_reply(output)]
        keys = ", ".join(sorted(output)[:6])
        raise LostReply(f"its output has neither `choices` nor `content` (keys: {keys})")
    if isinstance(output, str) and output.strip():
        if output.startswith(("ObjectRecord(", "WeaveObject(", "WeaveDict(")):
            raise LostReply(
                f"its output is the text of an object, not its data ({output[:40]!r}...): "
                "an export written before weave's objects were read as data"
            )
        return [Message(role="assistant", content=output)]  # an op of kind llm returning text
    raise LostReply(f"weave recorded no reply (output {output!r})")


def _openai_reply(output: dict[str, Any]) -> Message:
    choices = output["choices"]
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise LostReply("its output has no choice")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise LostReply("its choice has no message")
    [answered] = wire_openai.from_wire_messages([{"role": "assistant", **message}])
    if choice.get("finish_reason") == "tool_calls" and not answered.tool_calls:
        raise LostReply("it finished to call tools, but its output holds no tool call")
    return answered


def _anthropic_reply(output: dict[str, Any]) -> Message:
    blocks = [b for b in output["content"] if isinstance(b, dict)]
    [answered] = wire_anthropic.from_wire(None, [{"role": "assistant", "content": blocks}])
    if output.get("stop_reason") == "tool_use" and not answered.tool_calls:
        raise LostReply(
            "it stopped to use a tool, but its output holds no tool_use block (weave records "
            "a streamed reply's text only)"
        )
    return answered


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
    each call's reply. A call whose history is of an unknown shape, or a tool call whose
    arguments are not a JSON object, is reported (the call is left out; the arguments stay
    marked with `NOT_JSON`, see `readable`). A reply its call's output lost is read from the
    history of a later call (`_said_back`); `UnreadableReplies` when one is read nowhere."""
    messages: list[Message] = []
    users: list[str] = []
    seen_results: set[str] = set()
    lost: list[tuple[CallRecord, str, str | None]] = []  # not read yet: call, why, its user text
    for call in llm:
        try:
            sent = history(call)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            report(call, f"model call of an unknown shape ({type(exc).__name__}: {exc})")
            continue
        why = None
        try:
            answered = reply(call)
        except LostReply as exc:
            answered, why = [], str(exc)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            answered, why = [], f"its output is of an unknown shape ({type(exc).__name__}: {exc})"
        said = [m.content.strip() for m in sent if m.role == "user" and m.content.strip()]
        ours = {_key(m) for m in messages[len(messages) - 40 :]}
        if lost:  # replies not read yet: this call's history may say them
            back = _said_back(sent, lost[0][2], ours)[: len(lost)]
            messages += back
            ours |= {_key(m) for m in back}
            del lost[: len(back)]
        if why is not None:
            lost.append((call, why, _last_user(sent)))
        added = [Message(role="user", content=text) for text in new_user_turns(users, said)]
        users = said
        last_user = max((i for i, m in enumerate(sent) if m.role == "user"), default=-1)
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
    if lost:
        raise UnreadableReplies([(call, why) for call, why, _ in lost])
    return messages


def _last_user(sent: list[Message]) -> str | None:
    """The last user text a call was sent (what its reply answered)."""
    return next((m.content.strip() for m in reversed(sent) if m.role == "user"), None)


def _said_back(
    sent: list[Message], answering: str | None, ours: set[tuple[Any, ...]]
) -> list[Message]:
    """The replies a later call's history says the agent gave to the user text `answering`
    that the conversation does not hold yet: the assistant messages after that text's last
    occurrence and before the next user text, in order. An app keeps what the model said (the
    tool calls, to send their results; the text, as history), so a reply its call's output lost
    (see `LostReply`) is there when the app sends it on."""
    start = 0
    if answering is not None:
        found = [
            i for i, m in enumerate(sent) if m.role == "user" and m.content.strip() == answering
        ]
        if not found:
            return []
        start = found[-1] + 1
    back = []
    for message in sent[start:]:
        if message.role == "user" and message.content.strip():
            break
        if message.role == "assistant" and _key(message) not in ours:
            back.append(message)
    return back


def readable(messages: list[Message]) -> None:
    """Empty the arguments that were not a JSON object (once they can no longer be replayed)."""
    for tool_call in (c for m in messages for c in m.tool_calls):
        if NOT_JSON in tool_call.arguments:
            tool_call.arguments = {}

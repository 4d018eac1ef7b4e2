"""Production conversations rebuilt from call trees, as Transcripts.

Calls are grouped by thread (`weave.thread`, one session across several traces) or else by
trace, through a temporary SQLite table so that a large export is never held in memory. Three
shapes are understood:

1. the harness's own `harness.episode` calls, whose output is the Transcript;
2. agents instrumented with `@weave.op` following this convention: each user turn is a call
   with `kind="agent"` (or any call whose inputs carry `conversation` or `messages` as a list of
   role/content dicts and whose output is the reply text), tools are calls with `kind="tool"`
   below it, named after the tool, with the tool's arguments as inputs and its result as output;
3. agents whose model calls weave patched automatically: OpenAI chat completions (`messages` in
   the inputs, `choices` in the output) and Anthropic messages (`system` and `messages` in, content
   blocks out); the call with the longest history holds the conversation.

A group of another shape is reported as unreadable; the rest of the batch goes on.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.models import wire_anthropic, wire_openai
from harness.traces.calls import CallRecord, Unreadable
from harness.traces.episodes import EPISODE_OP, from_trace
from harness.transcript import EndReason, EpisodeError, Message, Side, ToolCall, Transcript

OPENAI_OPS = ("openai.chat.completions.create", "openai.chat.completions.parse")
ANTHROPIC_OPS = (
    "anthropic.Messages.create",
    "anthropic.messages.create",
    "anthropic.AsyncMessages.create",
    "Messages.create",
)


@dataclass
class Observation:
    """A tool call seen in production: what was asked and what came back."""

    name: str
    arguments: dict[str, Any]
    result: Any = None
    error: str | None = None


@dataclass
class Conversation:
    """One production conversation with everything conversion needs."""

    key: str
    project: str
    transcript: Transcript
    observations: list[Observation] = field(default_factory=list)
    exception: tuple[str, str] | None = None
    feedback: list[dict[str, Any]] = field(default_factory=list)
    attributes: dict[str, Any] = field(default_factory=dict)
    trace_ids: list[str] = field(default_factory=list)
    call_ids: list[str] = field(default_factory=list)
    started_at: str = ""

    def user_texts(self) -> list[str]:
        return [m.content for m in self.transcript.messages if m.role == "user" and m.content]


def grouped(records: Iterable[CallRecord]) -> Iterator[list[CallRecord]]:
    """The calls of each thread (or trace, when the call has no thread), in start order,
    staged on disk so that memory holds one group at a time."""
    with tempfile.TemporaryDirectory() as folder:
        db = sqlite3.connect(Path(folder) / "calls.db")
        try:
            db.execute("CREATE TABLE calls (grp TEXT, started TEXT, seq INTEGER, data TEXT)")
            batch: list[tuple[str, str, int, str]] = []
            for seq, record in enumerate(records):
                group = (
                    f"thread:{record.thread_id}" if record.thread_id else f"trace:{record.trace_id}"
                )
                batch.append((group, record.started_at, seq, record.model_dump_json()))
                if len(batch) >= 5000:
                    db.executemany("INSERT INTO calls VALUES (?, ?, ?, ?)", batch)
                    batch.clear()
            db.executemany("INSERT INTO calls VALUES (?, ?, ?, ?)", batch)
            db.execute("CREATE INDEX by_group ON calls (grp, started, seq)")
            current, calls = None, []
            for group, data in db.execute("SELECT grp, data FROM calls ORDER BY grp, started, seq"):
                if group != current and calls:
                    yield calls
                    calls = []
                current = group
                calls.append(CallRecord.model_validate_json(data))
            if calls:
                yield calls
        finally:
            db.close()


def conversations(
    records: Iterable[CallRecord], problems: list[Unreadable]
) -> Iterator[Conversation]:
    """Every conversation in the calls; groups of an unknown shape go to `problems`."""
    for calls in grouped(records):
        try:
            found = list(_from_group(calls))
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            problems.append(
                Unreadable(_where(calls), f"malformed calls: {type(exc).__name__}: {exc}")
            )
            continue
        if not found:
            ops = ", ".join(sorted({c.op for c in calls})[:5])
            problems.append(Unreadable(_where(calls), f"no conversation found (ops: {ops})"))
        yield from found


def _where(calls: list[CallRecord]) -> str:
    first = calls[0]
    return f"thread {first.thread_id}" if first.thread_id else f"trace {first.trace_id}"


def _from_group(calls: list[CallRecord]) -> Iterator[Conversation]:
    episodes = [c for c in calls if c.op == EPISODE_OP]
    if episodes:
        for call in episodes:
            yield _from_episode(call, calls)
        return
    turns = [c for c in calls if c.kind == "agent" or _is_turn(c)]
    if turns:
        yield _from_turns(turns, calls)
        return
    llm = [c for c in calls if c.op.startswith(OPENAI_OPS + ANTHROPIC_OPS) or c.kind == "llm"]
    if llm:
        yield _from_llm_calls(llm, calls)


def _is_turn(call: CallRecord) -> bool:
    history = call.inputs.get("conversation", call.inputs.get("messages"))
    return (
        isinstance(history, list)
        and bool(history)
        and all(isinstance(m, dict) and "role" in m for m in history)
        and not call.op.startswith(OPENAI_OPS + ANTHROPIC_OPS)
        and (isinstance(call.output, str) or call.exception is not None)
    )


def _base(calls: list[CallRecord], transcript: Transcript) -> Conversation:
    feedback = [row for c in calls for row in c.feedback]
    attributes: dict[str, Any] = {}
    for call in calls:
        attributes.update({k: v for k, v in call.attributes.items() if k != "weave"})
    return Conversation(
        key=_where(calls),
        project=calls[0].project_id,
        transcript=transcript,
        feedback=feedback,
        attributes=attributes,
        trace_ids=list(dict.fromkeys(c.trace_id for c in calls)),
        call_ids=[c.id for c in calls if c.parent_id is None],
        started_at=calls[0].started_at,
    )


def _from_episode(call: CallRecord, calls: list[CallRecord]) -> Conversation:
    transcript = from_trace(call.output)
    if transcript is None:
        raise ValueError(f"episode call {call.id} has no transcript")
    conversation = _base([call], transcript)
    conversation.observations = _observed(transcript.messages)
    if transcript.error is not None:
        conversation.exception = (transcript.error.side.value, transcript.error.message)
    return conversation


def _observed(messages: list[Message]) -> list[Observation]:
    results = {m.tool_call_id: m for m in messages if m.role == "tool"}
    observed = []
    for call in (c for m in messages for c in m.tool_calls):
        result = results.get(call.id)
        error = result.content if result is not None and result.is_error else None
        value = None if result is None or error else _json(result.content)
        observed.append(Observation(call.name, call.arguments, value, error))
    return observed


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _children(calls: list[CallRecord], root: CallRecord) -> list[CallRecord]:
    """Every call below `root`, in start order."""
    below, frontier = [], {root.id}
    for call in calls:  # calls are in start order, so parents come first
        if call.parent_id in frontier:
            below.append(call)
            frontier.add(call.id)
    return below


def _from_turns(turns: list[CallRecord], calls: list[CallRecord]) -> Conversation:
    messages: list[Message] = []
    observations: list[Observation] = []
    exception = None
    seen_users = 0
    for turn in turns:
        history = turn.inputs.get("conversation", turn.inputs.get("messages")) or []
        users = [m for m in history if m.get("role") == "user"]
        for item in users[seen_users:]:
            messages.append(Message(role="user", content=str(item.get("content", ""))))
        seen_users = len(users)
        for tool in (c for c in _children(calls, turn) if c.kind == "tool"):
            name = tool.op.split(".")[-1]
            arguments = {k: v for k, v in tool.inputs.items() if k != "self"}
            call_id = f"call_{len(observations)}"
            error = tool.error()
            observations.append(
                Observation(
                    name, arguments, tool.output, f"{error[0]}: {error[1]}" if error else None
                )
            )
            messages.append(
                Message(
                    role="assistant",
                    tool_calls=[ToolCall(id=call_id, name=name, arguments=arguments)],
                )
            )
            messages.append(
                Message(
                    role="tool",
                    tool_call_id=call_id,
                    name=name,
                    content=json.dumps(tool.output) if not error else f"Error: {error[1]}",
                    is_error=error is not None,
                )
            )
        if turn.error() is not None:
            exception = turn.error()
            break
        reply = turn.output.get("content") if isinstance(turn.output, dict) else turn.output
        messages.append(Message(role="assistant", content=str(reply or "")))
    end = EndReason.AGENT_CRASH if exception else EndReason.USER_STOP
    transcript = _transcript(messages, end, exception)
    conversation = _base(calls, transcript)
    conversation.observations, conversation.exception = observations, exception
    return conversation


def _transcript(
    messages: list[Message], end: EndReason, exception: tuple[str, str] | None
) -> Transcript:
    error = (
        EpisodeError(side=Side.AGENT, message=f"{exception[0]}: {exception[1]}")
        if (exception)
        else None
    )
    return Transcript(
        task_id="production",
        variant="production",
        variant_hash="",
        messages=messages,
        end_reason=end,
        error=error,
        turns=sum(m.role == "user" for m in messages),
    )


def _from_llm_calls(llm: list[CallRecord], calls: list[CallRecord]) -> Conversation:
    def history(call: CallRecord) -> list[Message]:
        if call.op.startswith(ANTHROPIC_OPS):
            return wire_anthropic.from_wire(call.inputs.get("system"), call.inputs["messages"])
        return wire_openai.from_wire_messages(call.inputs["messages"])

    last = max(llm, key=lambda c: (len(c.inputs.get("messages") or []), c.started_at))
    messages = [m for m in history(last) if m.role != "system"]
    exception = last.error()
    if exception is None and last.output:
        output = last.output
        if last.op.startswith(ANTHROPIC_OPS):
            messages += wire_anthropic.from_wire(
                None, [{"role": "assistant", "content": output["content"]}]
            )
        else:
            messages += wire_openai.from_wire_messages([output["choices"][0]["message"]])
    end = EndReason.AGENT_CRASH if exception else EndReason.USER_STOP
    conversation = _base(calls, _transcript(messages, end, exception))
    conversation.observations = _observed(messages)
    conversation.exception = exception
    return conversation

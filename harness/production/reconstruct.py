"""Production conversations rebuilt from call trees, as Transcripts.

Calls are grouped by thread (`weave.thread`, one session across several traces) or else by
trace, through a temporary SQLite table so that a large export is never held in memory. Three
shapes are understood:

1. the harness's own `harness.episode` calls, whose output is the Transcript;
2. agents instrumented with `@weave.op` following this convention: each user turn is a call
   with `kind="agent"` (or any call whose inputs carry `conversation` or `messages` as a list of
   role/content dicts and whose output is the reply text), tools are calls with `kind="tool"`
   below it, named after the tool, with the tool's arguments as inputs and its result as output;
3. any app whose model calls weave patched automatically (OpenAI chat completions, Anthropic
   messages; see `llm_calls`): the conversation is what the model calls saw and said, the tools
   are those they were offered, and tool ops are the calls named after an offered tool (or of
   `kind="tool"`), at any depth.

Whatever the shape, every call of the group is searched for failures: an exception (or an
`error` status) at any depth is kept where it started, not where it propagated to. A group of
another shape is reported as unreadable; a part of a group that cannot be used (a tool call
whose arguments are not an object, a tool op whose inputs are not the offered tool's
parameters) is reported and left out, and the rest of the conversation goes on.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.jsontext import json_or_text
from harness.outcomes import DEFAULT, ErrorValues
from harness.production import llm_calls
from harness.production.calls import CallRecord, Unreadable
from harness.production.episodes import EPISODE_OP, from_trace
from harness.production.tool_ops import (
    Observation,
    Raised,
    Report,
    is_tool_op,
    raised,
    tool_observations,
)
from harness.transcript import (
    EndReason,
    EpisodeError,
    Message,
    Side,
    ToolCall,
    ToolSpec,
    Transcript,
)


@dataclass
class Conversation:
    """One production conversation with everything conversion needs."""

    key: str
    project: str
    transcript: Transcript
    observations: list[Observation] = field(default_factory=list)
    errors: list[Raised] = field(default_factory=list)
    feedback: list[dict[str, Any]] = field(default_factory=list)
    attributes: dict[str, Any] = field(default_factory=dict)
    trace_ids: list[str] = field(default_factory=list)
    call_ids: list[str] = field(default_factory=list)  # the root calls
    started_at: str = ""
    tools: list[ToolSpec] = field(default_factory=list)  # offered to the production agent
    ops: set[str] = field(default_factory=set)  # every op name of its calls
    below: dict[str, set[str]] = field(default_factory=dict)  # a rated call: the calls under it

    def choices(self, tool: str, argument: str) -> list[Any]:
        """The few values an argument of an offered tool may take (its JSON Schema `enum`)."""
        spec = next((t for t in self.tools if t.name == tool), None)
        properties = (spec.parameters.get("properties") or {}) if spec else {}
        return list(properties.get(argument, {}).get("enum") or [])

    def user_texts(self) -> list[str]:
        return [m.content for m in self.transcript.messages if m.role == "user" and m.content]

    @property
    def exception(self) -> tuple[str, str] | None:
        """(type, message) of the first error, if any."""
        return (self.errors[0].type, self.errors[0].message) if self.errors else None


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
            current: str | None = None
            calls: list[CallRecord] = []
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
    records: Iterable[CallRecord],
    problems: list[Unreadable],
    error_values: ErrorValues = DEFAULT,
) -> Iterator[Conversation]:
    """Every conversation in the calls; groups (and parts of groups) of an unknown shape go to
    `problems`, and the batch goes on. A tool result that `error_values` reads as a failure is
    marked as one (`Observation.failed`)."""
    for calls in grouped(records):
        if any(c.interrupted for c in calls):
            why = "interrupted: its recording process ended mid-call; not converted"
            problems.append(Unreadable(_where(calls), why))
            continue
        try:
            found = list(_from_group(calls, problems, error_values))
        except llm_calls.UnreadableReplies as exc:  # what the agent said is unknown: no task
            problems.append(Unreadable(_where(calls), str(exc)))
            continue
        except Exception as exc:  # a group is data: whatever it holds, the batch goes on
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


def _from_group(
    calls: list[CallRecord], problems: list[Unreadable], error_values: ErrorValues
) -> Iterator[Conversation]:
    episodes = [c for c in calls if c.op == EPISODE_OP]
    if episodes:
        for call in episodes:
            yield _from_episode(call, error_values)
        return

    def report(call: CallRecord, why: str) -> None:
        problems.append(Unreadable(f"{_where(calls)} (trace {call.trace_id}, call {call.id})", why))

    turns = [c for c in calls if c.kind == "agent" or _is_turn(c)]
    if turns:
        yield _from_turns(turns, calls, report, error_values)
        return
    llm = [c for c in calls if llm_calls.is_llm(c)]
    if llm:
        yield _from_llm_calls(llm, calls, report, error_values)


def _is_turn(call: CallRecord) -> bool:
    history = call.inputs.get("conversation", call.inputs.get("messages"))
    return (
        isinstance(history, list)
        and bool(history)
        and all(isinstance(m, dict) and "role" in m for m in history)
        and not llm_calls.is_llm(call)
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
        started_at=calls[0].started_at,  # calls come in start order
        ops={c.op_name for c in calls},
        below={c.id: {d.id for d in _children(calls, c)} for c in calls if c.feedback},
    )


def _from_episode(call: CallRecord, error_values: ErrorValues) -> Conversation:
    transcript = from_trace(call.output)
    if transcript is None:
        raise ValueError(f"episode call {call.id} has no transcript")
    conversation = _base([call], transcript)
    conversation.observations = _observed(transcript.messages, error_values)
    if transcript.error is not None:
        kind, _, message = transcript.error.message.partition(": ")
        kind, message = (kind, message) if message and kind.isidentifier() else ("Error", kind)
        conversation.errors = [
            Raised(
                transcript.error.side.value, kind, message, call.id, call.trace_id, call.started_at
            )
        ]
    return conversation


def _observed(messages: list[Message], error_values: ErrorValues) -> list[Observation]:
    results = {m.tool_call_id: m for m in messages if m.role == "tool"}
    observed = []
    for call in (c for m in messages for c in m.tool_calls):
        result = results.get(call.id)
        error = result.content if result is not None and result.is_error else None
        value = None if result is None or error else json_or_text(result.content)
        failed = None if error else error_values.of(value)
        observed.append(Observation(call.name, call.arguments, value, error, failed=failed))
    return observed


def _from_turns(
    turns: list[CallRecord], calls: list[CallRecord], report: Report, error_values: ErrorValues
) -> Conversation:
    messages: list[Message] = []
    tool_ops = [c for c in calls if c.kind == "tool"]
    observations = tool_observations(tool_ops, {}, report, error_values)
    by_call = {o.call_id: o for o in observations}
    crash = None
    seen_users = 0
    for turn in turns:
        history = turn.inputs.get("conversation", turn.inputs.get("messages")) or []
        users = [m for m in history if m.get("role") == "user"]
        for item in users[seen_users:]:
            messages.append(Message(role="user", content=str(item.get("content", ""))))
        seen_users = len(users)
        for tool in (by_call[c.id] for c in _children(calls, turn) if c.id in by_call):
            messages += _tool_messages(tool, f"call_{len(messages)}")
        if turn.error() is not None:
            crash = turn.error()
            break
        reply = turn.output.get("content") if isinstance(turn.output, dict) else turn.output
        messages.append(Message(role="assistant", content=str(reply or "")))
    errors = raised(calls, {o.name for o in observations})
    conversation = _base(calls, _transcript(messages, crash))
    conversation.observations, conversation.errors = observations, errors
    return conversation


def _children(calls: list[CallRecord], root: CallRecord) -> list[CallRecord]:
    """Every call below `root`, in start order."""
    below, frontier = [], {root.id}
    for call in calls:  # calls are in start order, so parents come first
        if call.parent_id in frontier:
            below.append(call)
            frontier.add(call.id)
    return below


def _tool_messages(tool: Observation, call_id: str) -> list[Message]:
    content = f"Error: {tool.error}" if tool.error else json.dumps(tool.result)
    return [
        Message(
            role="assistant",
            tool_calls=[ToolCall(id=call_id, name=tool.name, arguments=tool.arguments)],
        ),
        Message(
            role="tool",
            tool_call_id=call_id,
            name=tool.name,
            content=content,
            is_error=tool.error is not None,
        ),
    ]


def _transcript(messages: list[Message], crash: tuple[str, str] | None) -> Transcript:
    """A production conversation as a Transcript; `crash`: what stopped the app, if it raised."""
    error = EpisodeError(side=Side.AGENT, message=f"{crash[0]}: {crash[1]}") if crash else None
    return Transcript(
        task_id="production",
        variant="production",
        variant_hash="",
        messages=messages,
        end_reason=EndReason.AGENT_CRASH if crash else EndReason.USER_STOP,
        error=error,
        turns=sum(m.role == "user" for m in messages),
    )


def _from_llm_calls(
    llm: list[CallRecord], calls: list[CallRecord], report: Report, error_values: ErrorValues
) -> Conversation:
    tools = llm_calls.offered_tools(llm)
    offered = {t.name: t for t in tools}
    messages = llm_calls.conversation_messages(llm_calls.main_calls(llm), report)
    if not messages:
        raise ValueError("no message could be read")
    tool_ops = [c for c in calls if is_tool_op(c, set(offered))]
    if tool_ops:
        observations = tool_observations(tool_ops, offered, report, error_values)
    else:  # the tools were not traced: what the model calls saw of them
        unreadable = llm_calls.NOT_JSON
        observed = _observed(messages, error_values)
        observations = [o for o in observed if unreadable not in o.arguments]
    llm_calls.readable(messages)
    errors = raised(calls, set(offered) | {o.name for o in observations})
    crash = next((c.error() for c in calls if c.parent_id is None and c.error()), None)
    crash = crash or next((c.error() for c in llm if c.error()), None)
    conversation = _base(calls, _transcript(messages, crash))
    conversation.observations, conversation.errors = observations, errors
    conversation.tools = tools
    return conversation

"""What makes a production conversation a failure, its failure signature, and clusters of
near-duplicates.

A conversation is a *failure* when any call in it raised (root, tool op, model call, any
depth) or ended with status error, when the agent told the user an action succeeded right after
a tool call failed (a silent failure: the tool returned an error value such as `{"error": ...}`,
see `harness.outcomes`, and the reply said "Done!"), when it got negative feedback (a
thumbs-down reaction, a note, a custom label saying it was bad, or an `expected` label), or when
it ended unresolved (the attribute `resolved: false`). Any failure, anywhere: it never becomes a
success task. A tool error the agent owned up to is no failure by itself.

Signature: for an exception, the op where it started, its type and its message *template*; for
a silent failure, the tool and its error's template; for feedback, the failing step (the tool
calls under the rated call, with their enum-valued arguments), else the note's (or label's)
template; otherwise the tool sequence and the opening words. Templates replace what varies
between occurrences of one failure: the call's own argument values (by name, quoted or not),
emails, URLs, UUIDs, amounts, ids and other tokens mixing letters and digits, numbers, and
quoted strings. This is a regular
expression normaliser rather than a log-template miner such as `drain3`: drain3 learns its
templates from the lines it has seen, so one message could get a different template (and its
task a different file name) from one conversion to the next; a fixed normaliser gives the same
message the same signature whatever else is converted, which keeps conversion idempotent.

Feedback conventions: reactions (`wandb.reaction.*`, 👎 negative), notes (`wandb.note.*`),
`expected` feedback with a payload such as `{"answer": "30 days", "must_call": [...],
"must_not_call": ["issue_refund"]}`, and any other feedback whose payload says the answer was
bad (`false`, or a label such as "bad", "wrong", "incorrect").
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from harness.outcomes import false_successes
from harness.production.calls import EPOCH, Filters, op_matches, parse_time
from harness.production.reconstruct import Conversation, Raised

NEGATIVE_EMOJI = {
    "👎",
    "👎🏻",
    "👎🏼",
    "👎🏽",
    "👎🏾",
    "👎🏿",
    "thumbsdown",
    "thumbs_down",
    "-1",
    ":-1:",
}
NEGATIVE_LABELS = {"bad", "wrong", "incorrect", "negative", "fail", "failed", "unhelpful", "no"}
EXPECTED = ("expected", "harness.expected")
MAX_IDS = 1000  # trace and call ids listed in a task's provenance (its count says how many)

EMAILS = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")
_MASKS = [
    (EMAILS, "<email>"),
    (re.compile(r"\bhttps?://\S+"), "<url>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\b"), "<uuid>"),
    (re.compile(r"[$€£]\s?\d+(?:[.,]\d+)*|\b\d+(?:[.,]\d+)*\s?(?:USD|EUR|GBP)\b"), "<amount>"),
    (re.compile(r"\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[\w-]+\b"), "<id>"),
    (re.compile(r"\d+(?:[.,]\d+)*"), "<n>"),
    (re.compile(r"'[^']*'|\"[^\"]*\""), "<str>"),
]


def template(text: str, values: dict[str, str] | None = None) -> str:
    """What stays the same between occurrences of one message: `KeyError: 'Ticket T-9001 not
    found'` and `... 'Ticket T-9002 not found'` both give `ticket <id> not found`. `values`
    (argument name: value) are masked by name wherever they stand, quoted or not: `account
    jdoe is locked` with `username: jdoe` gives `account <username> is locked`."""
    text = text.strip()
    if len(text) > 1 and text[0] == text[-1] and text[0] in "'\"" and text[0] not in text[1:-1]:
        text = text[1:-1]  # the repr of a KeyError's argument: the whole message is quoted
    for name, value in sorted((values or {}).items(), key=lambda item: -len(item[1])):
        if len(value) >= 3 and value.casefold() in text.casefold():
            text = re.sub(rf"(?<!\w){re.escape(value)}(?!\w)", f"<{name}>", text, flags=re.I)
    for pattern, mask in _MASKS:
        text = pattern.sub(mask, text)
    return " ".join(text.lower().split())


@dataclass
class Failure:
    """What makes a conversation a failure: errors anywhere, feedback, attributes."""

    errors: list[Raised] = field(default_factory=list)
    negative: bool = False
    notes: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)  # custom feedback that said it was bad
    expected: dict[str, Any] = field(default_factory=dict)
    unresolved: bool = False
    feedback_calls: list[str] = field(default_factory=list)  # calls that got the feedback
    silent: list[tuple[Raised, str]] = field(default_factory=list)  # a failed call, the claim

    @property
    def failed(self) -> bool:
        return bool(self.errors or self.silent or self.negative or self.expected or self.unresolved)

    def reasons(self) -> list[str]:
        reasons = [str(error) for error in self.errors]
        reasons += [
            f"claimed success after a tool error: {error.tool} answered {error.message!r}, then "
            f"the agent said {reply[:100]!r}"
            for error, reply in self.silent
        ]
        reasons += [f"negative feedback: {note}" for note in self.notes]
        reasons += [f"negative feedback: {label}" for label in self.labels]
        if self.negative and not (self.notes or self.labels):
            reasons.append("negative feedback")
        if self.expected:
            reasons.append(f"expected: {json.dumps(self.expected, sort_keys=True)}")
        if self.unresolved:
            reasons.append("ended unresolved")
        return reasons


def _feedback_call(row: dict[str, Any]) -> str | None:
    ref = str(row.get("weave_ref") or "")
    return ref.rsplit("/call/", 1)[-1] if "/call/" in ref else None


def _bad_label(kind: str, payload: Any) -> str | None:
    """A custom feedback row that says the answer was bad, as `type: value`."""
    values = payload.values() if isinstance(payload, dict) else [payload]
    for value in values:
        if value is False or (isinstance(value, str) and value.lower() in NEGATIVE_LABELS):
            return f"{kind}: {json.dumps(value)}"
    return None


def _silent(conversation: Conversation) -> list[tuple[Raised, str]]:
    """The failed tool calls the agent told the user had succeeded."""
    if not any(o.failure for o in conversation.observations):
        return []  # every tool call succeeded: nothing to claim falsely
    found = []
    for tool, message, reply in false_successes(conversation.transcript.messages):
        observation = next(
            (o for o in conversation.observations if o.name == tool and o.failure), None
        )
        arguments = observation.arguments if observation else {}
        call = (observation.call_id if observation else None) or ""
        kind = "ToolError" if observation is not None and observation.error else "error value"
        error = Raised(tool, kind, message, call, "", "", tool, arguments)
        found.append((error, reply))
    return found


def failure_of(conversation: Conversation) -> Failure:
    found = Failure(errors=list(conversation.errors), silent=_silent(conversation))
    for row in conversation.feedback:
        kind, payload = str(row.get("feedback_type", "")), row.get("payload") or {}
        negative = True
        if kind.startswith("wandb.reaction"):
            negative = str(payload.get("emoji", "")).strip() in NEGATIVE_EMOJI
        elif kind.startswith("wandb.note"):
            negative = bool(payload.get("note"))
            if negative:
                found.notes.append(str(payload["note"]))
        elif kind in EXPECTED and isinstance(payload, dict):
            found.expected.update(payload)
        elif label := _bad_label(kind, payload):
            found.labels.append(label)
        else:
            negative = False
        if negative:
            found.negative = found.negative or kind not in EXPECTED
            if (call := _feedback_call(row)) and call not in found.feedback_calls:
                found.feedback_calls.append(call)
    found.unresolved = conversation.attributes.get("resolved") is False
    return found


def signature(conversation: Conversation, failure: Failure) -> str:
    """What near-duplicates share (see the module docstring)."""
    if failure.errors:
        first = failure.errors[0]
        return "\n".join(["error", first.op, first.type, template(first.message)])
    if failure.silent:
        first, _ = failure.silent[0]
        return "\n".join(["silent", first.op, template(first.message, _strings(first.arguments))])
    step = failing_step(conversation, failure)
    if step and (failure.negative or failure.labels):
        return "\n".join(["feedback", step])
    if failure.notes or failure.labels:
        return "\n".join(["feedback", *sorted(template(t) for t in failure.notes + failure.labels)])
    tools = ">".join(o.name for o in conversation.observations)
    users = conversation.user_texts()
    values = {k: v for o in conversation.observations for k, v in _strings(o.arguments).items()}
    words = " ".join(users[0].split()[:8]) if users else ""
    opening = " ".join(template(words, values).split()[:5])
    if failure.failed:
        expected = json.dumps(failure.expected, sort_keys=True)
        kind = "unresolved" if failure.unresolved else "feedback"
        return "\n".join([kind, tools, opening, expected])
    return "\n".join(["success", tools, opening])


def _strings(arguments: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in arguments.items() if isinstance(v, str)}


def failing_step(conversation: Conversation, failure: Failure) -> str:
    """The tool calls under the calls that got negative feedback, with the arguments that take
    one of a few values (a JSON Schema `enum`): `create_ticket(priority=normal)`. Feedback on
    one step is one failure mode however the notes are worded. "" when no tool call is below."""
    below: set[str] = set()
    for call in failure.feedback_calls:
        below |= conversation.below.get(call, set())
    steps = []
    for observation in (o for o in conversation.observations if o.call_id in below):
        chosen = [
            f"{k}={v}"
            for k, v in observation.arguments.items()
            if conversation.choices(observation.name, k)
        ]
        steps.append(f"{observation.name}({', '.join(chosen)})")
    return ">".join(dict.fromkeys(steps))


@dataclass
class Cluster:
    """Conversations with one signature: the first stands for them all."""

    signature: str
    first: Conversation
    failure: Failure
    count: int = 0  # conversations (sessions)
    traces: int = 0
    trace_ids: list[str] = field(default_factory=list)
    call_ids: list[str] = field(default_factory=list)
    first_seen: datetime | None = None
    last_seen: datetime | None = None

    @property
    def task_id(self) -> str:
        kind = "fail" if self.failure.failed else "ok"
        return f"prod-{kind}-{hashlib.sha256(self.signature.encode()).hexdigest()[:10]}"

    def add(self, conversation: Conversation, failure: Failure) -> None:
        self.count += 1
        self.traces += len(conversation.trace_ids)
        room = MAX_IDS - len(self.trace_ids)
        self.trace_ids += conversation.trace_ids[: max(room, 0)]
        calls = [e.call_id for e in failure.errors] + failure.feedback_calls
        calls += [e.call_id for e, _ in failure.silent if e.call_id]
        calls = calls or conversation.call_ids  # a success: its root calls
        self.call_ids += calls[: max(MAX_IDS - len(self.call_ids), 0)]
        times = [parse_time(e.started_at) for e in failure.errors]
        seen = min((t for t in times if t), default=None) or conversation_start(conversation)
        self.first_seen = min(self.first_seen or seen, seen)
        self.last_seen = max(self.last_seen or seen, seen)


def conversation_start(conversation: Conversation) -> datetime:
    return parse_time(conversation.started_at) or EPOCH


def admitted(conversation: Conversation, failure: Failure, filters: Filters) -> bool:
    """Whether the conversation-level filters keep a conversation."""
    if filters.status == "error" and not (failure.errors or failure.silent):
        return False
    if filters.status == "success" and failure.failed:
        return False
    if filters.negative and not failure.negative:
        return False
    timed = filters.since is not None or filters.until is not None
    if timed and not filters.admits_time(conversation_start(conversation)):
        return False
    if filters.ops:
        tools = {o.name for o in conversation.observations}
        return any(
            any(op_matches(p, op) for op in conversation.ops) or p.removeprefix("tool.") in tools
            for p in filters.ops
        )
    return True


def cluster(
    conversations: Iterable[Conversation], filters: Filters | None = None
) -> dict[str, Cluster]:
    """Group the conversations the filters admit by signature."""
    filters = filters or Filters()
    clusters: dict[str, Cluster] = {}
    for conversation in conversations:
        failure = failure_of(conversation)
        if not admitted(conversation, failure, filters):
            continue
        key = signature(conversation, failure)
        if key not in clusters:
            clusters[key] = Cluster(key, conversation, failure)
        clusters[key].add(conversation, failure)
    return clusters

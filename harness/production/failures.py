"""What makes a production conversation a failure, and what makes it a success of known
quality. (Failure signatures and clusters of near-duplicates: `harness.production.clusters`;
how the words of a message or a note are read: `harness.production.wording`.)

A conversation is a *failure* when any call in it raised (root, tool op, model call, any
depth) or ended with status error, when the agent told the user an action succeeded right after
a tool call failed (a silent failure: the tool returned an error value such as `{"error": ...}`,
see `harness.outcomes`, and a sentence of the reply claimed it worked, whatever else the reply
said: "I'm sorry to hear that. Done!" owns nothing up), when it got negative feedback (a
thumbs-down reaction, a note that reads as a complaint, a custom label saying it was bad, or an
`expected` label), or when it ended unresolved (the attribute `resolved: false`). Any failure,
anywhere: it never becomes a success task. A tool error the agent owned up to is no failure by
itself, and neither is an error the user's own input caused that the agent handled (a mistyped
id: the lookup says not found, the agent tells the user so or asks them to check it): the
replay raises it whatever the agent does, so it is nothing a task may assert.

Feedback is read with its sentiment: a note is a complaint unless it reads as praise ("Quick and
easy, thanks!"), and praise left with a thumbs-up is a positive rating, no failure. A *success*
task comes from a session of known quality only: rated positive (a thumbs-up, praise, a good
label, and nothing negative), or with no failure signal and a completed outcome (tool calls
made, none failed, the user did not abandon, the last reply is no open question); and never
from an unrated session that repeats a decision negative feedback singled out elsewhere in the
batch (a call with the same enum-valued arguments, `file_claim(coverage=flood)`: an unrated
session of the buggy agent would lock the bug in). The others are of unknown quality and left
out.

Feedback conventions: reactions (`wandb.reaction.*`: 👎 negative, 👍 positive), notes
(`wandb.note.*`), `expected` feedback with a payload such as `{"answer": "30 days",
"must_call": [...], "must_not_call": ["issue_refund"]}`, and any other feedback whose payload
says the answer was bad (`false`, or a label such as "bad", "wrong", "incorrect") or good
(`true`, "good", "correct").
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from harness.outcomes import claims_success, false_successes
from harness.production.calls import EPOCH, Filters, op_matches, parse_time
from harness.production.reconstruct import Conversation, Raised
from harness.production.wording import sentiment, token, told_not_found

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
POSITIVE_EMOJI = {
    "👍",
    "👍🏻",
    "👍🏼",
    "👍🏽",
    "👍🏾",
    "👍🏿",
    "thumbsup",
    "thumbs_up",
    "+1",
    ":+1:",
}
NEGATIVE_LABELS = {"bad", "wrong", "incorrect", "negative", "fail", "failed", "unhelpful", "no"}
POSITIVE_LABELS = {"good", "right", "correct", "positive", "pass", "passed", "helpful", "yes"}
EXPECTED = ("expected", "harness.expected")
NOT_FOUND = re.compile(
    r"not found|no such|does ?n[o']t exist|unknown|missing|no \w+ with", re.IGNORECASE
)
NOT_FOUND_TYPES = ("KeyError", "LookupError", "IndexError", "NotFound", "DoesNotExist")
ABANDONED = re.compile(
    r"\b(forget it|never ?mind|give up|i give up|i['\u2019]?ll (?:call|go|do it|try) \w+|"
    r"waste of (?:my )?time|useless|pointless|this is ridiculous)\b",
    re.IGNORECASE,
)
CLOSING = re.compile(
    r"\b(thanks?|thank you|thx|cheers|bye|goodbye|great|perfect|ok(?:ay)?|that['\u2019]?s all|"
    r"got it|awesome)\b",
    re.IGNORECASE,
)


@dataclass
class Failure:
    """What makes a conversation a failure (errors anywhere, feedback, attributes), and what
    makes it a success of known quality (a positive rating)."""

    errors: list[Raised] = field(default_factory=list)
    negative: bool = False
    notes: list[str] = field(default_factory=list)  # notes that read as complaints
    labels: list[str] = field(default_factory=list)  # custom feedback that said it was bad
    expected: dict[str, Any] = field(default_factory=dict)
    unresolved: bool = False
    feedback_calls: list[str] = field(default_factory=list)  # calls that got the feedback
    silent: list[tuple[Raised, str]] = field(default_factory=list)  # a failed call, the claim
    positive: bool = False  # rated positive (a thumbs-up, praise, a good label), nothing negative
    praise: list[str] = field(default_factory=list)  # notes that read as praise
    handled: list[Raised] = field(default_factory=list)  # the user's mistyped ids, handled

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


def _label(kind: str, payload: Any, labels: set[str], flag: bool) -> str | None:
    """A custom feedback row whose payload says `flag` (False: bad, True: good), as
    `type: value`."""
    values = payload.values() if isinstance(payload, dict) else [payload]
    for value in values:
        if value is flag or (isinstance(value, str) and value.lower() in labels):
            return f"{kind}: {json.dumps(value)}"
    return None



def not_found(error: Raised) -> bool:
    return error.type.endswith(NOT_FOUND_TYPES) or bool(NOT_FOUND.search(error.message))


def typed_by_user(error: Raised, conversation: Conversation) -> list[str]:
    """The failing call's string arguments that the user typed (word for word), when the error
    says what they named was not found: a failure the user's input caused."""
    if not error.tool or not not_found(error):
        return []
    said = " ".join(conversation.user_texts())
    return [
        value
        for value in error.arguments.values()
        if isinstance(value, str)
        and len(value) >= 3
        and re.search(token(value), said, re.IGNORECASE)
    ]


def handled_by_agent(error: Raised, conversation: Conversation) -> bool:
    """Whether an error the user's input caused was handled: the agent did not crash and a reply
    tells the user the value was not found, or asks them to check it."""
    if conversation.transcript.error is not None:
        return False
    typed = typed_by_user(error, conversation)
    replies = [
        m.content for m in conversation.transcript.messages if m.role == "assistant" and m.content
    ]
    return any(re.search(told_not_found(v), r) for v in typed for r in replies)


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
    """What failed in a conversation, and whether it was rated positive (see the module
    docstring)."""
    found = Failure(silent=_silent(conversation))
    for error in conversation.errors:
        handled = typed_by_user(error, conversation) and handled_by_agent(error, conversation)
        (found.handled if handled else found.errors).append(error)
    reactions = [
        str((row.get("payload") or {}).get("emoji", "")).strip()
        for row in conversation.feedback
        if str(row.get("feedback_type", "")).startswith("wandb.reaction")
    ]
    thumbs_down = any(r in NEGATIVE_EMOJI for r in reactions)
    thumbs_up = any(r in POSITIVE_EMOJI for r in reactions)
    for row in conversation.feedback:
        kind, payload = str(row.get("feedback_type", "")), row.get("payload") or {}
        negative = False
        if kind.startswith("wandb.reaction"):
            emoji = str(payload.get("emoji", "")).strip()
            negative = emoji in NEGATIVE_EMOJI
            found.positive = found.positive or emoji in POSITIVE_EMOJI
        elif kind.startswith("wandb.note"):
            note = str(payload.get("note") or "")
            mood = sentiment(note)
            if not note.strip():
                continue
            if thumbs_down or mood < 0 or (mood == 0 and not thumbs_up):
                negative = True
                found.notes.append(note)
            else:
                found.praise.append(note)
                found.positive = True
        elif kind in EXPECTED and isinstance(payload, dict):
            found.expected.update(payload)
            negative = True
        elif label := _label(kind, payload, NEGATIVE_LABELS, False):
            found.labels.append(label)
            negative = True
        elif _label(kind, payload, POSITIVE_LABELS, True):
            found.positive = True
        if negative:
            found.negative = found.negative or kind not in EXPECTED
            if (call := _feedback_call(row)) and call not in found.feedback_calls:
                found.feedback_calls.append(call)
    found.unresolved = conversation.attributes.get("resolved") is False
    found.positive = found.positive and not found.failed
    return found


def completed(conversation: Conversation, failure: Failure | None = None) -> bool:
    """Whether a conversation reached an outcome: tool calls were made and none failed (but for
    the user's mistyped ids the agent handled, `failure.handled`), the user did not abandon it
    ("forget it"), and the last reply is no open question (one that claims nothing done, unless
    the user had just closed with thanks)."""
    handled = {e.call_id for e in failure.handled} if failure is not None else set()
    observations = [o for o in conversation.observations if o.call_id not in handled]
    if not observations or any(o.failure for o in observations):
        return False
    users = conversation.user_texts()
    if users and ABANDONED.search(users[-1]):
        return False
    messages = conversation.transcript.messages
    replies = [i for i, m in enumerate(messages) if m.role == "assistant" and m.content]
    if not replies:
        return False
    last = messages[replies[-1]].content.strip()
    if last.endswith("?") and not claims_success(last):
        closed = bool(users) and bool(CLOSING.search(users[-1])) and len(users) > 1
        return closed
    return True



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


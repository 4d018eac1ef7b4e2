"""What makes a production conversation a failure, its failure signature, and clusters of
near-duplicates.

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

Signature: for an exception, the op where it started, its type and its message *template*; for
a silent failure, the tool and its error's template; for feedback, the failing step (one tool
call under the rated call, with its enum-valued arguments: the one a note names, by its tool or
by one of its argument's values, else the one the batch's negative feedback singles out, the
call most specific to the rated sessions, so that an incidental upload in the same turn does
not split one failure in two), else the note's (or label's) template; for a success, the calls
with their enum-valued arguments and the opening words. Templates replace what varies between
occurrences of one failure: the call's own argument values (by name, quoted or not), emails,
URLs, UUIDs, amounts, ids and other tokens mixing letters and digits, numbers, and quoted
strings. This is a regular expression normaliser rather than a log-template miner such as
`drain3`: drain3 learns its templates from the lines it has seen, so one message could get a
different template (and its task a different file name) from one conversion to the next; a
fixed normaliser gives the same message the same signature whatever else is converted, which
keeps conversion idempotent.

Feedback conventions: reactions (`wandb.reaction.*`: 👎 negative, 👍 positive), notes
(`wandb.note.*`), `expected` feedback with a payload such as `{"answer": "30 days",
"must_call": [...], "must_not_call": ["issue_refund"]}`, and any other feedback whose payload
says the answer was bad (`false`, or a label such as "bad", "wrong", "incorrect") or good
(`true`, "good", "correct").
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from harness.outcomes import claims_success, false_successes
from harness.production.calls import EPOCH, Filters, op_matches, parse_time
from harness.production.reconstruct import Conversation, Observation, Raised

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
MAX_IDS = 1000  # trace and call ids listed in a task's provenance (its count says how many)

# An email ends with a word, never with the period of the sentence it stands in.
EMAILS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_MASKS = [
    (EMAILS, "<email>"),
    (re.compile(r"\bhttps?://\S+"), "<url>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\b"), "<uuid>"),
    (re.compile(r"[$€£]\s?\d+(?:[.,]\d+)*|\b\d+(?:[.,]\d+)*\s?(?:USD|EUR|GBP)\b"), "<amount>"),
    (re.compile(r"\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[\w-]+\b"), "<id>"),
    (re.compile(r"\d+(?:[.,]\d+)*"), "<n>"),
    (re.compile(r"'[^']*'|\"[^\"]*\""), "<str>"),
]
# A note's sentiment, read from its words: praise ("Quick and easy, thanks!") against complaint
# ("should be water damage, not flood"). Deliberately small: a note is a complaint unless its
# praise outweighs it, and a thumbs-up tips a note with neither.
PRAISE = re.compile(
    r"\b(thanks?|thank you|thx|great|quick(?:ly)?|fast|easy|easily|perfect(?:ly)?|helpful|"
    r"excellent|awesome|amazing|love[ds]?|nice|smooth(?:ly)?|good job|well done|brilliant|"
    r"fantastic|appreciated?|wonderful|spot on|painless|clear|friendly|worked)\b",
    re.IGNORECASE,
)
COMPLAINT = re.compile(
    r"\b(wrong(?:ly)?|should(?:n['\u2019]t)?|not|never|n['\u2019]t|failed|fails?|bad|incorrect(?:ly)?|"
    r"errors?|still|but|however|instead|missing|useless|terrible|awful|broken|ignored|lied|"
    r"false(?:ly)?|mistakes?|nothing|waste|slow|confus\w*|frustrat\w*|annoy\w*|rude|"
    r"unhelpful|hallucinat\w*|never|claimed|pretended)\b|n['\u2019]t\b",
    re.IGNORECASE,
)
NOT_FOUND = re.compile(
    r"not found|no such|does ?n[o']t exist|unknown|missing|no \w+ with", re.IGNORECASE
)
NOT_FOUND_TYPES = ("KeyError", "LookupError", "IndexError", "NotFound", "DoesNotExist")
# What a reply says when it tells the user a value they gave was not found, or asks them to
# check it: the handling of a mistyped id.
TOLD_NOT_FOUND = (
    r"(?:not (?:be )?(?:found|find|locate|exist|see|match|valid|recogni[sz]e)|"
    r"n['\u2019]t (?:find|locate|exist|see|match|recogni[sz]e|seem to exist)|"
    r"unable to (?:find|locate)|"
    r"no (?:such|record|match|\w+ (?:with|under|matching|for) (?:that|this))|"
    r"invalid|unknown|double[- ]?check|check (?:the|that|this|your|it)|confirm|verify|typo|"
    r"re-?enter|correct (?:number|id)|right (?:number|id))"
)
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
PENDING = "feedback-on"  # a signature resolved once the whole batch is seen (`cluster`)


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


def sentiment(note: str) -> int:
    """How a note reads: above 0 praise, below 0 a complaint, 0 neither (counted words)."""
    return len(PRAISE.findall(note)) - len(COMPLAINT.findall(note))


def token(value: str) -> str:
    """A regular expression for `value` as a whole token: not inside a longer word or id
    (`CLM-1` is not in `CLM-12`)."""
    return rf"(?<![\w-]){re.escape(value)}(?![\w-])"


def value_pattern(value: Any) -> str:
    """A regular expression for an argument's value however its words are joined: `water_damage`
    also as "water damage" and "water-damage" (empty for a value without words)."""
    return r"[\s_-]+".join(re.escape(p) for p in re.split(r"[\s_-]+", str(value)) if p)


def told_not_found(value: str) -> str:
    """A regular expression for a reply that names `value` and says it was not found, or asks
    the user to check it (whichever comes first, within one reply)."""
    named = token(value)
    return rf"(?is){named}.*\b{TOLD_NOT_FOUND}|\b{TOLD_NOT_FOUND}.*{named}"


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


def step(conversation: Conversation, observation: Observation) -> str:
    """A tool call as a step: its name and the arguments that take one of a few values (a JSON
    Schema `enum`), `file_claim(coverage=flood)`; free text and ids vary between occurrences
    of one step and are left out."""
    if not conversation.tools:  # no offered tool declares an enum
        return f"{observation.name}()"
    chosen = [
        f"{k}={v}"
        for k, v in observation.arguments.items()
        if conversation.choices(observation.name, k)
    ]
    return f"{observation.name}({', '.join(chosen)})"


def rated_steps(
    conversation: Conversation, failure: Failure, everywhere: bool = False
) -> list[tuple[Observation, str]]:
    """The tool calls under the calls that got negative feedback, as steps, once each, in order;
    every call of the conversation when the rated calls have none below (feedback on a later
    turn that made no call is about what was done before), or with `everywhere`."""
    below: set[str] = set()
    for call in failure.feedback_calls:
        below |= conversation.below.get(call, set())
    observations = [o for o in conversation.observations if o.call_id in below]
    if everywhere or not observations:
        observations = [o for o in conversation.observations if o.call_id is not None]
    seen: dict[str, Observation] = {}
    for observation in observations:
        seen.setdefault(step(conversation, observation), observation)
    return [(o, s) for s, o in seen.items()]


def names(text: str, value: Any) -> bool:
    """Whether a note names a value (`water_damage` read as "water damage" too)."""
    pattern = _named(str(value))
    return pattern is not None and pattern.search(text) is not None


@functools.lru_cache(maxsize=4096)
def _named(value: str) -> re.Pattern[str] | None:
    pattern = value_pattern(value)
    if not pattern:
        return None
    return re.compile(rf"(?<!\w){pattern}(?!\w)", re.IGNORECASE)


def named_step(
    conversation: Conversation, failure: Failure, steps: list[tuple[Observation, str]]
) -> str | None:
    """The step a note points at: the call whose tool it names, else the call one of whose
    enum-valued arguments it names a value of (the one used, or another)."""
    text = " ".join(failure.notes + failure.labels)
    if not text or not steps:
        return None
    for observation, rendered in steps:
        if names(text, observation.name):
            return rendered
    for observation, rendered in steps:
        for argument in observation.arguments:
            if any(names(text, v) for v in conversation.choices(observation.name, argument)):
                return rendered
    return None


def signature(
    conversation: Conversation, failure: Failure, rendered: list[str] | None = None
) -> str:
    """What near-duplicates share (see the module docstring). Feedback on several calls that
    no note singles out gives a pending signature, `feedback-on` and the candidate steps, which
    `cluster` resolves once the whole batch is seen."""
    if failure.errors:
        first = failure.errors[0]
        return "\n".join(["error", first.op, first.type, template(first.message)])
    if failure.silent:
        first, _ = failure.silent[0]
        return "\n".join(["silent", first.op, template(first.message, _strings(first.arguments))])
    if failure.negative or failure.labels:
        steps = rated_steps(conversation, failure)
        if steps:
            named = named_step(conversation, failure, steps) or named_step(
                conversation, failure, rated_steps(conversation, failure, everywhere=True)
            )
            if named:
                return "\n".join(["feedback", named])
            return "\n".join([PENDING, *(s for _, s in steps)])
    if failure.notes or failure.labels:
        return "\n".join(["feedback", *sorted(template(t) for t in failure.notes + failure.labels)])
    users = conversation.user_texts()
    values = {k: v for o in conversation.observations for k, v in _strings(o.arguments).items()}
    words = " ".join(users[0].split()[:8]) if users else ""
    opening = " ".join(template(words, values).split()[:5])
    if failure.failed:
        tools = ">".join(o.name for o in conversation.observations)
        expected = json.dumps(failure.expected, sort_keys=True)
        kind = "unresolved" if failure.unresolved else "feedback"
        return "\n".join([kind, tools, opening, expected])
    if rendered is None:  # the conversation's calls as steps, when the caller has them
        rendered = [step(conversation, o) for o in conversation.observations]
    return "\n".join(["success", ">".join(rendered), opening])


def _strings(arguments: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in arguments.items() if isinstance(v, str)}


def failing_step(conversation: Conversation, failure: Failure) -> str:
    """The step a note singles out among the calls under the rated calls, else all of them
    (`a>b`); "" when no tool call is below."""
    steps = rated_steps(conversation, failure)
    return named_step(conversation, failure, steps) or ">".join(s for _, s in steps)


def note_score(conversation: Conversation, failure: Failure) -> int:
    """How much a conversation's notes state that a check can use (a tool, another value of an
    enum-valued argument, an amount, `name=value`): the cluster's representative is the
    member whose notes state the most, so a task is written from a note that names the fix."""
    text = " ".join(failure.notes)
    if not text:
        return -1
    tools = {t.name for t in conversation.tools} | {o.name for o in conversation.observations}
    score = sum(names(text, tool) for tool in tools)
    for observation in conversation.observations:
        for argument, used in observation.arguments.items():
            others = [v for v in conversation.choices(observation.name, argument) if v != used]
            score += 2 * sum(names(text, v) for v in others)
    score += len(re.findall(r"[$€£]\s?\d|\b\w+\s*[=:]\s*\S", text))
    return score


@dataclass
class Cluster:
    """Conversations with one signature: the representative (`first`: the first seen, or the
    member whose notes state the most) stands for them all."""

    signature: str
    first: Conversation
    failure: Failure
    count: int = 0  # conversations (sessions)
    traces: int = 0
    trace_ids: list[str] = field(default_factory=list)
    call_ids: list[str] = field(default_factory=list)
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    rated: int = 0  # members rated positive (a success)
    score: int = -1  # how much the representative's notes state (`note_score`)

    @property
    def task_id(self) -> str:
        kind = "fail" if self.failure.failed else "ok"
        return f"prod-{kind}-{hashlib.sha256(self.signature.encode()).hexdigest()[:10]}"

    @property
    def basis(self) -> str:
        """Why a success cluster is a success: its sessions' ratings, or their outcome."""
        if self.rated:
            return f"rated positive ({self.rated} of {self.count} session(s))"
        return "no failure signal and a completed outcome (unrated)"

    def add(self, conversation: Conversation, failure: Failure) -> None:
        self.count += 1
        self.rated += failure.positive
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
        if failure.notes and self.signature.startswith(("feedback\n", PENDING)):
            score = note_score(conversation, failure)
            if score > self.score:
                self.first, self.failure, self.score = conversation, failure, score

    def merge(self, other: Cluster) -> None:
        """Take in another cluster's conversations (a pending signature resolved to this one)."""
        self.count += other.count
        self.rated += other.rated
        self.traces += other.traces
        self.trace_ids += other.trace_ids[: max(MAX_IDS - len(self.trace_ids), 0)]
        self.call_ids += other.call_ids[: max(MAX_IDS - len(self.call_ids), 0)]
        for seen in (other.first_seen, other.last_seen):
            if seen is not None:
                self.first_seen = min(self.first_seen or seen, seen)
                self.last_seen = max(self.last_seen or seen, seen)
        if other.score > self.score:
            self.first, self.failure, self.score = other.first, other.failure, other.score


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


@dataclass
class _Batch:
    """What the whole batch says about steps: in how many sessions each step was made, and in
    how many sessions whose negative feedback no error explains."""

    made: Counter[str] = field(default_factory=Counter)
    rated_bad: Counter[str] = field(default_factory=Counter)
    steps: dict[str, tuple[str, ...]] = field(default_factory=dict)  # success cluster: its steps
    unknown: int = 0  # sessions of unknown quality left out

    def singled_out(self, candidates: list[str]) -> str:
        """The candidate most specific to negatively rated sessions: the share of the sessions
        making it that were rated bad (smoothed, so that one session is weak evidence), then a
        step with enum-valued arguments (a decision), then the most often rated bad."""

        def weight(candidate: str) -> tuple[float, bool, int]:
            bad, made = self.rated_bad[candidate], self.made[candidate]
            return (bad + 1) / (made + 2), not candidate.endswith("()"), bad

        return max(candidates, key=weight)


def cluster(
    conversations: Iterable[Conversation],
    filters: Filters | None = None,
    left_out: list[str] | None = None,
) -> dict[str, Cluster]:
    """Group the conversations the filters admit by signature; feedback signatures pending the
    batch are resolved at its end, and success clusters of unknown quality are left out (see
    the module docstring; `left_out` gets a line saying how many sessions, when given)."""
    filters = filters or Filters()
    clusters: dict[str, Cluster] = {}
    batch = _Batch()
    for conversation in conversations:
        failure = failure_of(conversation)
        rendered = [step(conversation, o) for o in conversation.observations]
        made = set(rendered)
        batch.made.update(made)
        key = signature(conversation, failure, rendered)
        if key.startswith(("feedback\n", PENDING)):
            batch.rated_bad.update(made)
        if not admitted(conversation, failure, filters):
            continue
        if not failure.failed and not (failure.positive or completed(conversation, failure)):
            batch.unknown += 1
            continue
        if key not in clusters:
            clusters[key] = Cluster(key, conversation, failure)
            if key.startswith("success\n"):
                batch.steps[key] = tuple(sorted(made))
        clusters[key].add(conversation, failure)
    resolved: dict[str, Cluster] = {}
    for key, found in clusters.items():
        if key.startswith(PENDING):
            final = "\n".join(["feedback", batch.singled_out(key.split("\n")[1:])])
            found.signature = final
        else:
            final = key
        if final in resolved:
            resolved[final].merge(found)
        else:
            resolved[final] = found
    bad_steps = {  # a decision (a call with enum-valued arguments) negative feedback pointed at
        k.split("\n", 1)[1] for k in resolved if k.startswith("feedback\n") and not k.endswith("()")
    }
    for key in [k for k in resolved if k.startswith("success\n")]:
        found = resolved[key]
        if not found.rated and bad_steps & set(batch.steps.get(key, ())):
            batch.unknown += found.count
            del resolved[key]
    if batch.unknown and left_out is not None:
        left_out.append(
            f"{batch.unknown} session(s) of unknown quality made no success task: unrated with "
            "no completed outcome, or repeating a decision negative feedback singled out"
        )
    return resolved

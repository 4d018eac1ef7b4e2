"""Failure signatures and clusters of near-duplicates: conversations that failed (or succeeded)
the same way share a signature, and one task stands for the whole cluster, so a batch makes one
task per failure, not one per session.

Signature: for an exception, the op where it started, its type and its message *template*; for
a silent failure, the tool and its error's template; for feedback, the failing step (one tool
call under the rated call, with its enum-valued arguments: the one a note names, by its tool or
by one of its argument's values, else the one the batch's negative feedback singles out, the
call most specific to the rated sessions, so that an incidental upload in the same turn does
not split one failure in two), else the note's (or label's) template; for a success, the calls
with their enum-valued arguments and the opening words. Templates: `harness.production.wording`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from harness.production.calls import Filters, parse_time
from harness.production.failures import (
    Failure,
    admitted,
    completed,
    conversation_start,
    failure_of,
)
from harness.production.reconstruct import Conversation, Observation
from harness.production.wording import names, template

MAX_IDS = 1000  # trace and call ids listed in a task's provenance (its count says how many)
PENDING = "feedback-on"  # a signature resolved once the whole batch is seen (`cluster`)


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


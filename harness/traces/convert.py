"""Production conversations become regression tasks: a failure seen once is tested forever.

A conversation is a *failure* when its agent raised, when it got negative feedback (a
thumbs-down reaction, a note), an `expected` feedback label, or the attribute `resolved: false`;
otherwise a *success*. Failures get checks for the correct behaviour where it is known (the
expected answer, tools that must or must not be called, no crash) and an llm_judge criterion
written from the feedback note; successes get checks that keep today's behaviour (tools called,
facts of the final answer, the final state). Conversations with the same signature (failure
kind, exception type and message template, tool sequence, opening message) become one task
that records how many traces it stands for.

Feedback conventions read here: reactions (`wandb.reaction.*`, 👎 negative), notes
(`wandb.note.*`), and `expected` feedback with a payload such as
`{"answer": "30 days", "must_call": ["transfer_to_human"], "must_not_call": ["issue_refund"]}`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.defaults import STOP_SIGNAL
from harness.domains import Environment, get_domain
from harness.traces.calls import Unreadable
from harness.traces.reconstruct import Conversation

NEGATIVE = {"👎", "thumbsdown", "-1", ":-1:"}
IDS = re.compile(r"\b[A-Z]{1,4}-\d+\b")  # any id, when the domain declares no `id_patterns`
EMAILS = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")
NUMBERS = re.compile(r"\d+(?:[.,]\d+)*")
POLITE = re.compile(r"\b(please|thanks|thank you|hi|hello)\b", re.IGNORECASE)
MAX_TRACE_IDS = 20


def id_patterns(domain: type[Environment] | None) -> dict[str, re.Pattern[str]]:
    """The kinds of ids a domain declares (`Environment.id_patterns`), else one generic `id`."""
    declared = domain.id_patterns if domain is not None else {}
    return {name: re.compile(pattern) for name, pattern in declared.items()} or {"id": IDS}


def mentioned_ids(texts: list[str], patterns: dict[str, re.Pattern[str]]) -> list[tuple[str, str]]:
    """(kind, id) of each id the texts mention, once, in the order they first appear."""
    found: list[tuple[int, int, str, str]] = []
    for index, text in enumerate(texts):
        for name, pattern in patterns.items():
            found += [(index, m.start(), name, m.group()) for m in pattern.finditer(text)]
    kinds: dict[str, str] = {}
    for _, _, name, value in sorted(found):
        kinds.setdefault(value, name)
    return [(name, value) for value, name in kinds.items()]


def template(text: str) -> str:
    """Text with ids, emails and numbers replaced, to compare messages and errors."""
    text = EMAILS.sub("<email>", text)
    text = IDS.sub("<id>", text)
    text = NUMBERS.sub("<n>", text)
    return " ".join(text.lower().split())


@dataclass
class Failure:
    """What makes a conversation a failure, from its exception, feedback and attributes."""

    exception: tuple[str, str] | None = None
    negative: bool = False
    notes: list[str] = field(default_factory=list)
    expected: dict[str, Any] = field(default_factory=dict)
    unresolved: bool = False

    @property
    def failed(self) -> bool:
        return bool(self.exception or self.negative or self.expected or self.unresolved)

    def reasons(self) -> list[str]:
        reasons = [f"exception {self.exception[0]}: {self.exception[1]}"] if self.exception else []
        reasons += [f"negative feedback: {note}" for note in self.notes] or (
            ["negative feedback"] if self.negative else []
        )
        if self.expected:
            reasons.append(f"expected: {json.dumps(self.expected, sort_keys=True)}")
        if self.unresolved:
            reasons.append("ended unresolved")
        return reasons


def failure_of(conversation: Conversation) -> Failure:
    found = Failure(exception=conversation.exception)
    for row in conversation.feedback:
        kind, payload = str(row.get("feedback_type", "")), row.get("payload") or {}
        if kind.startswith("wandb.reaction") and str(payload.get("emoji", "")) in NEGATIVE:
            found.negative = True
        elif kind.startswith("wandb.note") and payload.get("note"):
            found.negative = True
            found.notes.append(str(payload["note"]))
        elif kind in ("expected", "harness.expected") and isinstance(payload, dict):
            found.expected.update(payload)
    found.unresolved = conversation.attributes.get("resolved") is False
    return found


def signature(conversation: Conversation, failure: Failure) -> str:
    """What near-duplicates share."""
    error = f"{failure.exception[0]}: {template(failure.exception[1])}" if failure.exception else ""
    tools = ">".join(o.name for o in conversation.observations)
    users = conversation.user_texts()
    opening = " ".join(template(users[0]).split()[:5]) if users else ""
    kind = "failure" if failure.failed else "success"
    feedback = "|".join(sorted(template(n) for n in failure.notes))
    return "\n".join([kind, error, tools, opening, feedback])


@dataclass
class Cluster:
    """Conversations with one signature: the first stands for them all."""

    signature: str
    first: Conversation
    failure: Failure
    count: int = 0
    trace_ids: list[str] = field(default_factory=list)
    call_ids: list[str] = field(default_factory=list)
    first_seen: str = ""
    last_seen: str = ""

    @property
    def task_id(self) -> str:
        kind = "fail" if self.failure.failed else "ok"
        return f"prod-{kind}-{hashlib.sha256(self.signature.encode()).hexdigest()[:10]}"

    def add(self, conversation: Conversation) -> None:
        self.count += 1
        if len(self.trace_ids) < MAX_TRACE_IDS:
            self.trace_ids += conversation.trace_ids[: MAX_TRACE_IDS - len(self.trace_ids)]
            self.call_ids += conversation.call_ids[:5]
        started = conversation.started_at
        self.first_seen = min(self.first_seen or started, started)
        self.last_seen = max(self.last_seen, started)


def cluster(
    conversations: Iterable[Conversation],
    status: str = "any",
    negative_only: bool = False,
    op: str | None = None,
) -> dict[str, Cluster]:
    """Group conversations by signature, keeping those the filters admit."""
    clusters: dict[str, Cluster] = {}
    for conversation in conversations:
        failure = failure_of(conversation)
        if status == "error" and not failure.exception:
            continue
        if status == "success" and failure.failed:
            continue
        if negative_only and not failure.negative:
            continue
        if op and not any(o.name == op for o in conversation.observations):
            continue
        key = signature(conversation, failure)
        if key not in clusters:
            clusters[key] = Cluster(key, conversation, failure)
        clusters[key].add(conversation)
    return clusters


@dataclass
class TaskOptions:
    """How tasks are written."""

    domain: str
    state_file: Path | None = None
    state_db: Path | None = None
    persona_model: str | None = None  # None: the persona replays the user's turns


def _persona(conversation: Conversation, options: TaskOptions) -> dict[str, Any]:
    """A persona inferred from the user's turns (deterministically)."""
    users = conversation.user_texts()
    words = sum(len(u.split()) for u in users) / max(len(users), 1)
    traits = ["terse"] if words < 6 else ["detailed"]
    if any("!" in u or re.search(r"\b[A-Z]{3,}\b", IDS.sub("", u)) for u in users):
        traits.append("impatient")
    if any(POLITE.search(u) for u in users):
        traits.append("polite")
    persona: dict[str, Any] = {
        "name": "replay-" + hashlib.sha256(conversation.key.encode()).hexdigest()[:8],
        "description": "A user from production, asking what the original user asked.",
        "traits": traits,
        "style": f"About {round(words)} words per message, like the original user.",
        "patience": max(len(users) + 2, 3),
    }
    if options.persona_model:
        persona["model"] = options.persona_model
        return persona
    # Replay: the user's later turns in order, then end the conversation.
    persona["model"] = "scripted"
    persona["scripted_turns"] = [
        {"when": {"turn": n}, "reply": text} for n, text in enumerate(users[1:], start=2)
    ] + [{"reply": f"Thank you, that's all. {STOP_SIGNAL}"}]
    return persona


def _facts(conversation: Conversation) -> list[str]:
    """Values from tool results that the agent's answers state (tracking numbers, amounts)."""
    answers = " ".join(
        m.content for m in conversation.transcript.messages if m.role == "assistant" and m.content
    )
    values: list[str] = []
    for observation in conversation.observations:
        if not isinstance(observation.result, dict):
            continue
        for value in observation.result.values():
            if not isinstance(value, str | int | float) or isinstance(value, bool):
                continue
            text = f"{value:.2f}" if isinstance(value, float) else str(value)
            if len(text) >= 4 and any(c.isdigit() for c in text) and text in answers:
                values.append(text)
    return list(dict.fromkeys(values))[:3]


def _checks(
    cluster_: Cluster, state_check: dict[str, Any], patterns: dict[str, re.Pattern[str]]
) -> list[dict[str, Any]]:
    conversation, failure = cluster_.first, cluster_.failure
    checks: list[dict[str, Any]] = []
    if failure.failed:
        expected = failure.expected
        if expected.get("answer"):
            checks.append(
                {
                    "kind": "text",
                    "name": "gives the expected answer",
                    "contains": str(expected["answer"]),
                }
            )
        for tool in expected.get("must_call", []):
            checks.append({"kind": "tool_called", "name": f"calls {tool}", "tool": tool})
        for tool in expected.get("must_not_call", []):
            checks.append(
                {
                    "kind": "tool_called",
                    "name": f"never calls {tool}",
                    "tool": tool,
                    "min_count": 0,
                    "max_count": 0,
                }
            )
        if failure.exception:  # a crash fails the episode by itself; it must also answer
            ids = [value for _, value in mentioned_ids(conversation.user_texts(), patterns)]
            checks += [
                {"kind": "text", "name": f"answers about {i}", "contains": i} for i in ids[:2]
            ] or [{"kind": "text", "name": "answers", "regex": "\\w"}]
        decided = bool(checks)
        for note in failure.notes:
            checks.append(
                {
                    "kind": "llm_judge",
                    "name": "avoids the reported problem",
                    "criterion": "The agent does not make the mistake a reviewer reported on the "
                    f"production conversation: {note}",
                    "hard": not decided,
                }
            )
        if failure.unresolved or not checks:
            checks.append(
                {
                    "kind": "llm_judge",
                    "name": "resolves the request",
                    "criterion": "The agent correctly resolves the user's request.",
                }
            )
        return checks
    seen = set()
    for observation in conversation.observations:
        if observation.error is not None:
            continue
        ids = {
            k: v
            for k, v in observation.arguments.items()
            if isinstance(v, str)
            and (any(p.fullmatch(v) for p in patterns.values()) or EMAILS.fullmatch(v))
        }
        key = (observation.name, json.dumps(ids, sort_keys=True))
        if key not in seen:
            seen.add(key)
            checks.append({"kind": "tool_called", "tool": observation.name, "args": ids})
    checks += [
        {"kind": "text", "name": f"states {fact}", "contains": fact}
        for fact in _facts(conversation)
    ]
    if state_check:
        checks.append({"kind": "state", "name": "same final state", "expect": state_check})
    return checks or [{"kind": "text", "name": "answers", "regex": "\\w"}]


def task_data(cluster_: Cluster, out: Path, options: TaskOptions) -> dict[str, Any]:
    """The task YAML (as data) a cluster becomes."""
    conversation, failure = cluster_.first, cluster_.failure
    domain = get_domain(options.domain)
    calls = [(o.name, o.arguments, o.result) for o in conversation.observations if o.error is None]
    users = conversation.user_texts()
    patterns = id_patterns(domain)
    emails = [("email", e) for e in dict.fromkeys(e for u in users for e in EMAILS.findall(u))]
    known: dict[str, str] = {}
    counts: dict[str, int] = {}
    for name, value in mentioned_ids(users, patterns) + emails:  # id, id2, email, ...
        counts[name] = counts.get(name, 0) + 1
        known[name if counts[name] == 1 else f"{name}{counts[name]}"] = value
    start: dict[str, Any] = {"first_message": users[0] if users else "Hello"}
    for key, path in (("state_file", options.state_file), ("state_db", options.state_db)):
        if path is not None:
            start[key] = os.path.relpath(path.resolve(), out.resolve())
    observed = domain.observed_state(calls) if domain else {}
    if observed:
        start["state"] = observed
    kind = "failure" if failure.failed else "success"
    summary = failure.reasons()[0] if failure.failed else (users[0] if users else "")
    tools = list(dict.fromkeys(o.name for o in conversation.observations))
    return {
        "kind": "task",
        "id": cluster_.task_id,
        "title": f"Production {kind}: {summary[:90]}",
        "level": 2 if failure.failed else 1,
        "tags": ["regression", "production", kind, *tools],
        "domain": options.domain,
        "source": {
            "project": conversation.project,
            "kind": kind,
            "signature": cluster_.signature.replace("\n", " | "),
            "traces": cluster_.count,
            "trace_ids": cluster_.trace_ids,
            "call_ids": cluster_.call_ids,
            "first_seen": cluster_.first_seen,
            "last_seen": cluster_.last_seen,
            "reasons": failure.reasons(),
        },
        "persona": _persona(conversation, options),
        "scenario": {
            "reason": users[0] if users else "Unknown request.",
            "instructions": "Pursue the same request as the original user, as they did.",
            "known_info": known,
        },
        "start": start,
        "end": {"max_turns": max(len(users) + 2, 3)},
        "checks": _checks(
            cluster_,
            domain.expected_state(calls) if domain and not failure.failed else {},
            patterns,
        ),
    }


@dataclass
class Written:
    """What a conversion made, skipped and could not read."""

    made: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    unreadable: list[Unreadable] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


def write_tasks(
    clusters: dict[str, Cluster], out: Path, options: TaskOptions, force: bool = False
) -> Written:
    """One YAML file per cluster, named by its signature: idempotent, never overwriting an
    existing file unless `force`."""
    out.mkdir(parents=True, exist_ok=True)
    written = Written()
    for cluster_ in clusters.values():
        path = out / f"{cluster_.task_id}.yaml"
        written.counts[path.name] = cluster_.count
        if path.exists() and not force:
            written.skipped.append(path)
            continue
        data = task_data(cluster_, out, options)
        header = (
            f"# Made by `harness traces to-tasks` from {cluster_.count} production "
            f"trace(s) ({data['source']['kind']}).\n"
        )
        path.write_text(
            header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
        )
        written.made.append(path)
    return written

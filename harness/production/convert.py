"""Production conversations become regression tasks: a failure seen once is tested forever.

`failures` decides what failed, `clusters` groups near-duplicates, `derive` writes the checks of
the correct behaviour; this module makes each cluster a task that replays against the user's agent:

- its domain is `replay` by default (`harness.domains.replay`): the tools production's agent was
  offered, answering what production's tools returned, so no domain needs writing; or a user's
  domain (`--domain REF`), whose start state is seeded from the recorded tool results by the
  domain's `TraceReplay.observed_state(calls)` hook (and, for a success, whose
  `expected_state(calls)` gives a state check);
- the simulated user gets the first message verbatim and a scenario (the request, the goal, the
  ids, emails and amounts the user gave); its later turns are played by `--persona-model`, or
  else replayed from production in order, and the task is tagged `replayed-turns` because the
  replayed turns answer the old agent whatever the new one says;
- no check holds a value the server generated in the session (`generated`), and a success
  task says why it is one (`source.reasons`, and a tag: `rated-positive` for a session
  users rated well, `completed-unrated` for one with no failure signal and a completed
  outcome).

Everything a task takes from production passes through `harness.secrets.redact` (every string
of the task, keys included: its title, scenario, first message, recordings, checks, criteria,
source): keys, tokens, passwords, card numbers, CVVs and SSNs are masked, the same value with
the same placeholder wherever it appears, so a replay still matches a masked argument with its
masked recording. Emails and phone numbers stay: they are the facts the user gave and the
checks and the domain's state use. The file is written by the YAML emitter; its header comments
are single lines with secrets masked, so no newline in an op or exception can start a key.

A cluster that cannot become a valid task (a domain hook that raises on another app's data, a
task the loader would refuse) is reported and skipped; the others are written, each file
atomically, and only after every task was built: a conversion never leaves half its output.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.defaults import STOP_SIGNAL
from harness.domains import Environment, trace_replay
from harness.domains.trace_replay import Calls
from harness.grading.checks import kind_summary
from harness.outcomes import DEFAULT, ErrorValues
from harness.production import derive
from harness.production.calls import Unreadable
from harness.production.clusters import Cluster
from harness.production.criteria import rewrite_criteria
from harness.production.generated import generated_values
from harness.production.reconstruct import Conversation
from harness.production.tool_ops import Observation, inferred_tools
from harness.secrets import redact, redact_data, redactor
from harness.specs.agent import ModelRef

IDS = re.compile(r"\b[A-Z]{1,4}-\d+\b")  # any id, when the domain declares no `id_patterns`
POLITE = re.compile(r"\b(please|thanks|thank you|hi|hello)\b", re.IGNORECASE)
REPLAYED = "replayed-turns"
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's, when PyYAML has it


class NotConvertible(Exception):
    """A cluster that cannot become a task; the message says why."""


def id_patterns(domain: type[Environment] | None) -> dict[str, re.Pattern[str]]:
    """The kinds of ids a domain declares (`TraceReplay.id_patterns`), else one generic `id`."""
    declared = trace_replay.id_patterns(domain) if domain is not None else {}
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


@dataclass
class TaskOptions:
    """How tasks are written."""

    domain: str = "replay"  # as the task files name it (a file reference: relative to them)
    domain_class: type[Environment] | None = None  # what it resolves to (replay when None)
    state_file: Path | None = None
    state_db: Path | None = None
    persona_model: str | None = None  # None: the persona replays the user's turns
    criteria_model: ModelRef | None = None  # None: judge criteria from templates
    hard_judges: bool = False  # `--judge hard`: judge criteria decide the task too
    error_values: ErrorValues = DEFAULT  # which tool results are failures returned as values

    @property
    def replay(self) -> bool:
        from harness.domains.replay import ReplayEnvironment

        return self.domain_class is None or issubclass(self.domain_class, ReplayEnvironment)


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


def _scenario(
    conversation: Conversation, patterns: dict[str, re.Pattern[str]]
) -> tuple[dict[str, Any], list[str]]:
    """The simulated user's scenario from the user's turns, and the ids they mention."""
    users = conversation.user_texts()
    found = mentioned_ids(users, patterns)
    emails = [
        ("email", e) for e in dict.fromkeys(e for u in users for e in derive.EMAILS.findall(u))
    ]
    amounts = [
        ("amount", a)
        for a in dict.fromkeys(m.group() for u in users for m in derive.AMOUNTS.finditer(u))
    ]
    known: dict[str, str] = {}
    counts: dict[str, int] = {}
    for name, value in found + emails + amounts:  # id, id2, email, ...
        counts[name] = counts.get(name, 0) + 1
        known[name if counts[name] == 1 else f"{name}{counts[name]}"] = value
    said = " Then: ".join(f'"{u}"' for u in users[1:])
    goal = "You want what the original user wanted, and you pursue it the way they did." + (
        f" Later in the conversation they said: {said}" if said else ""
    )
    scenario = {
        "reason": users[0] if users else "Unknown request.",
        "instructions": goal,
        "known_info": known,
    }
    return scenario, [value for _, value in found]


def _start(
    cluster_: Cluster, out: Path, options: TaskOptions
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The task's `start` and, for a success in a user's domain, the expected final state."""
    conversation = cluster_.first
    users = conversation.user_texts()
    start: dict[str, Any] = {"first_message": users[0] if users else "Hello"}
    for key, path in (("state_file", options.state_file), ("state_db", options.state_db)):
        if path is not None:
            start[key] = os.path.relpath(path.resolve(), out.resolve())
    if options.replay:
        tools = inferred_tools(conversation.observations, conversation.tools)
        start["state"] = {
            "tools": [t.model_dump(mode="json") for t in tools],
            "recordings": [_recording(o) for o in conversation.observations],
        }
        return start, {}
    domain = options.domain_class
    assert domain is not None
    calls = [(o.name, o.arguments, o.result) for o in conversation.observations if o.error is None]
    observed = _hook(trace_replay.observed_state, domain, calls, options.domain)
    if observed:
        start["state"] = observed
    expected = (
        {}
        if cluster_.failure.failed
        else _hook(trace_replay.expected_state, domain, calls, options.domain)
    )
    return start, expected


def _recording(observation: Observation) -> dict[str, Any]:
    recorded = {"tool": observation.name, "arguments": observation.arguments}
    if observation.error is not None:
        return {**recorded, "error": observation.error}
    return {**recorded, "result": observation.result}


def _hook(
    hook: Callable[[type[Environment], Calls], dict[str, Any]],
    domain_class: type[Environment],
    calls: Calls,
    domain: str,
) -> dict[str, Any]:
    """A domain hook on production's calls; its failure (another app's arguments, say) makes
    the cluster not convertible instead of stopping the conversion."""
    try:
        return hook(domain_class, calls)
    except Exception as exc:
        raise NotConvertible(
            f"domain {domain}: {hook.__name__} failed on the recorded calls: "
            f"{type(exc).__name__}: {exc}"
        ) from None


def _known(start: dict[str, Any], options: TaskOptions) -> str:
    """The start state's text (a user domain's snapshot, and what production's lookups
    revealed): its values are facts of the state, not values the server generated."""
    parts = [json.dumps(start.get("state") or {}, ensure_ascii=False)] if not options.replay else []
    if options.state_file is not None:
        # the task names the file; a missing one is the loader's to report
        with contextlib.suppress(OSError, UnicodeDecodeError):
            parts.append(options.state_file.read_text())
    return "\n".join(parts)


def task_data(
    cluster_: Cluster, out: Path, options: TaskOptions
) -> tuple[dict[str, Any], list[str]]:
    """The task YAML (as data) a cluster becomes, and notes on what was left out."""
    conversation, failure = cluster_.first, cluster_.failure
    patterns = id_patterns(options.domain_class)
    scenario, ids = _scenario(conversation, patterns)
    start, expected = _start(cluster_, out, options)
    if options.replay:
        tools = {t["name"] for t in start["state"]["tools"]}
    else:
        assert options.domain_class is not None
        tools = set(options.domain_class.tool_names())
    known = _known(start, options)
    if failure.failed:
        checks = derive.failure_checks(
            conversation, failure, tools, ids, patterns, options.hard_judges
        )
    else:
        checks = derive.success_checks(conversation, patterns, expected, known)
    checks = derive.without_generated(checks, generated_values(conversation, known))
    notes = [
        f"check '{c.get('name') or c['kind']}' dropped: "
        f"domain {options.domain} has no tool {c['tool']}"
        for c in checks
        if c.get("tool") and c["tool"] not in tools
    ]
    checks = [c for c in checks if not (c.get("tool") and c["tool"] not in tools)]
    if not any(c.get("hard", True) for c in checks):
        checks.append({"kind": "text", "name": "answers", "regex": "\\w"})
    kind = "failure" if failure.failed else "success"
    users = conversation.user_texts()
    summary = failure.reasons()[0] if failure.failed else (users[0] if users else "")
    reasons = failure.reasons() if failure.failed else [cluster_.basis]
    tags = [
        "regression",
        "production",
        kind,
        *([] if failure.failed else ["rated-positive" if cluster_.rated else "completed-unrated"]),
        *dict.fromkeys(o.name for o in conversation.observations),
    ]
    if not options.persona_model:
        tags.append(REPLAYED)
    data = {
        "kind": "task",
        "id": cluster_.task_id,
        "title": f"Production {kind}: {' '.join(summary.split())[:90]}",  # one line
        "level": 2 if failure.failed else 1,
        "tags": tags,
        "domain": options.domain,
        "source": {
            "project": conversation.project,
            "kind": kind,
            "signature": cluster_.signature.replace("\n", " | "),
            "count": cluster_.count,
            "traces": cluster_.traces,
            "trace_ids": cluster_.trace_ids,
            "call_ids": cluster_.call_ids,
            "first_seen": cluster_.first_seen.isoformat() if cluster_.first_seen else "",
            "last_seen": cluster_.last_seen.isoformat() if cluster_.last_seen else "",
            "reasons": reasons,
        },
        "persona": _persona(conversation, options),
        "scenario": scenario,
        "start": start,
        "end": {"max_turns": max(len(users) + 2, 3)},
        "checks": checks,
    }
    return data, notes


@dataclass
class Written:
    """What a conversion made, skipped and could not read."""

    made: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    unreadable: list[Unreadable] = field(default_factory=list)
    notes: list[Unreadable] = field(default_factory=list)  # what a written task left out
    counts: dict[str, int] = field(default_factory=dict)


def _validated(data: dict[str, Any], options: TaskOptions) -> None:
    """Refuse a task the loader would refuse: its schema, and a replay task's start state (a
    tool whose parameters are no JSON Schema, say)."""
    from pydantic import BaseModel, ValidationError

    from harness.domains.replay import ReplayState
    from harness.specs.task import Task

    start = data["start"]
    checked: list[tuple[type[BaseModel], Any, str]] = [(Task, data, "")]
    if options.replay and not (start.get("state_file") or start.get("state_db")):
        checked.append((ReplayState, start["state"], "start.state"))
    for model, value, where in checked:
        try:
            model.model_validate(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            path = ".".join([where, *map(str, first["loc"])] if where else map(str, first["loc"]))
            message = first["msg"].removeprefix("Value error, ")
            raise NotConvertible(f"the task would not validate: {path}: {message}") from None


def write_tasks(
    clusters: dict[str, Cluster], out: Path, options: TaskOptions, force: bool = False
) -> Written:
    """One YAML file per cluster, named by its signature: idempotent, never overwriting an
    existing file unless `force`. Every task is built before any file is written."""
    written = Written()
    masked = redactor()
    built: list[tuple[Path, dict[str, Any], Cluster]] = []
    for cluster_ in clusters.values():
        path = out / f"{cluster_.task_id}.yaml"
        written.counts[path.name] = cluster_.count
        if path.exists() and not force:
            written.skipped.append(path)
            continue
        where = f"{cluster_.first.key} ({cluster_.count} conversation(s))"
        try:
            data, notes = task_data(cluster_, out, options)
            data = redact_data(data, masked)  # before the check: a masked task must be valid
            _validated(data, options)
        except NotConvertible as exc:
            written.unreadable.append(Unreadable(where, str(exc)))
            continue
        written.notes += [Unreadable(where, note) for note in notes]
        built.append((path, data, cluster_))
    if options.criteria_model is not None:
        failing = [(d, c.first) for _, d, c in built if c.failure.failed]
        notes = rewrite_criteria(failing, options.criteria_model)
        written.notes += [Unreadable("--criteria-model", note) for note in notes]
        for data, conversation in failing:  # a model quoting production quotes its values too
            made = generated_values(conversation, _known(data["start"], options))
            data["checks"] = redact_data(derive.without_generated(data["checks"], made), masked)
    out.mkdir(parents=True, exist_ok=True)
    for path, data, cluster_ in built:
        lines = [
            f"Made by `harness traces to-tasks` from {cluster_.count} production "
            f"conversation(s) ({data['source']['kind']}).",
            *_explained(data["checks"]),
        ]
        text = yaml.dump(data, Dumper=DUMPER, sort_keys=False, allow_unicode=True, width=100)
        _write_atomically(path, "".join(comment(line) for line in lines) + text)
        written.made.append(path)
    written.notes = redacted(written.notes)
    written.unreadable = redacted(written.unreadable)
    return written


def redacted(problems: list[Unreadable]) -> list[Unreadable]:
    """The problems with secrets masked in what they say (they quote production's text)."""
    return [problem.masked(redact) for problem in problems]


def comment(text: str) -> str:
    """`text` as one YAML comment line: every line break (`\\n`, `\\r`, `\\x85`, `\\u2028`...)
    and run of whitespace made one space, so that nothing in it can start a key."""
    return f"# {' '.join(text.split())}\n"


# What the checks `derive` writes stand for in a task made from production, in its words; any
# other kind is explained by its own class (`kind_summary`: when it passes).
MEANINGS = {
    "no_error": "the failure production raised does not happen again",
    "no_false_success": "no reply claims success after a tool call failed (production's "
    "silent failure)",
    "tool_called": "a call of the correct behaviour is made",
    "text": "the reply states what it must",
    "state": "the final state is what production's calls left",
    "llm_judge": "a judge's view of the handling",
}


def _explained(checks: list[dict[str, Any]]) -> list[str]:
    """A comment line per check: what it stands for, and whether it decides the task."""
    lines = ["Checks:"]
    for check in checks:
        weight = "decides" if check.get("hard", True) else "soft, reported only"
        meaning = MEANINGS.get(check["kind"]) or kind_summary(check["kind"])
        if check.get("max_count") == 0:
            meaning = "the call that went wrong in production is never made"
        lines.append(f"  {check.get('name') or check['kind']}: {meaning} ({weight})")
    return lines


def _write_atomically(path: Path, text: str) -> None:
    """Write through a temporary file and a rename: a file is whole or absent."""
    with tempfile.NamedTemporaryFile(
        "w", dir=path.parent, prefix=f".{path.stem}-", suffix=".tmp", delete=False
    ) as temporary:
        temporary.write(text)
    os.replace(temporary.name, path)

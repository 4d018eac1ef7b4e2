"""The checks of a task made from production: what the correct behaviour is, never what failed.

- An exception: the episode must finish without that exception at that tool and without an
  agent crash (`no_error`); for a not-found error, the agent must tell the user about the id
  (having looked it up, or asking to confirm it) rather than act on it; otherwise it must answer
  about the ids the user gave; and an `llm_judge` criterion written from the exception and the
  conversation.
- Negative feedback: an `llm_judge` criterion from the note, plus deterministic checks when the
  note states a value: an amount (the call it corrects, with the right amount; never the wrong
  one), a tool (called, or never called when the note says so), an argument (`name=value`).
  An `expected` label states them directly (`answer`, `must_call`, `must_not_call`).
- A silent failure (the agent said a call succeeded when it had answered an error value):
  `no_false_success` at that tool, never a check requiring the call that failed.
- A success: the tools called with their key arguments (ids, emails, values the user said word
  for word), facts of the answers that
  came from tool results, and the final state the domain says those calls imply; never a call
  that failed, nor a value the server generated in the session (`generated`).

A judge criterion is soft unless asked for hard ones (`--judge hard`): a task never hangs on a
judge alone by default, and when no deterministic check applies it only asks for an answer.
"""

from __future__ import annotations

import json
import re
from typing import Any

from harness.jsontext import json_or_text
from harness.production.failures import EMAILS, Failure
from harness.production.reconstruct import Conversation, Observation, Raised

AMOUNTS = re.compile(r"[$€£]\s?(\d+(?:\.\d{1,2})?)|\b(\d+\.\d{2})\b")
NOT_FOUND = re.compile(
    r"not found|no such|does ?n[o']t exist|unknown|missing|no \w+ with", re.IGNORECASE
)
NOT_FOUND_TYPES = ("KeyError", "LookupError", "IndexError", "NotFound", "DoesNotExist")
NEGATION = re.compile(r"\b(not|never|n't|without|instead of|shouldn't|mustn't)\b", re.IGNORECASE)
Check = dict[str, Any]


def is_id(value: Any, patterns: dict[str, re.Pattern[str]]) -> bool:
    """An id the domain declares, or an email."""
    return isinstance(value, str) and (
        any(p.fullmatch(value) for p in patterns.values()) or bool(EMAILS.fullmatch(value))
    )


def _said(value: Any, said: str) -> bool:
    """A string argument the user gave word for word."""
    return isinstance(value, str) and len(value) >= 3 and value.casefold() in said


def key_arguments(arguments: dict[str, Any], patterns: dict[str, re.Pattern[str]]) -> Check:
    return {k: v for k, v in arguments.items() if is_id(v, patterns)}


def _judge(name: str, criterion: str) -> Check:
    return {"kind": "llm_judge", "name": name, "criterion": criterion}


def _not_found(error: Raised) -> bool:
    return error.type.endswith(NOT_FOUND_TYPES) or bool(NOT_FOUND.search(error.message))


def error_checks(
    error: Raised, conversation: Conversation, ids: list[str], patterns: dict[str, re.Pattern[str]]
) -> list[Check]:
    """The correct behaviour where production raised `error`."""
    if error.tool:
        checks: list[Check] = [
            {
                "kind": "no_error",
                "name": f"no {error.type} at {error.tool}, no agent crash",
                "tool": error.tool,
                "error": error.type,
            }
        ]
    else:
        checks = [{"kind": "no_error", "name": "no agent crash"}]
    failing_ids = [v for v in error.arguments.values() if is_id(v, patterns)]
    if error.tool and _not_found(error) and failing_ids:
        checks += [
            {"kind": "text", "name": f"tells the user about {value}", "contains": value}
            for value in failing_ids[:2]
        ]
    else:
        checks += [
            {"kind": "text", "name": f"answers about {value}", "contains": value}
            for value in ids[:2]
        ] or [{"kind": "text", "name": "answers", "regex": "\\w"}]
    users = conversation.user_texts()
    asked = f' when the user said "{users[0][:200]}"' if users else ""
    where = f"the tool {error.tool}" if error.tool else f"{error.op}"
    hint = (
        "make sure what the user named exists (look it up) before acting on it, or ask the user "
        "to confirm it"
        if _not_found(error)
        else "check what that step needs before taking it"
    )
    checks.append(
        _judge(
            "handles what failed in production",
            f"In production, {where} raised {error.type} ({error.message}){asked}. This time "
            f"the agent does not repeat the failing step: it should {hint}, and tell the user "
            "plainly what it did or what it needs.",
        )
    )
    return checks


def silent_checks(error: Raised, reply: str, conversation: Conversation) -> list[Check]:
    """The correct behaviour where production told the user a failed call had succeeded: no
    such claim this time (decided without a model), and a judge's view of the handling."""
    users = conversation.user_texts()
    asked = f' when the user said "{users[0][:200]}"' if users else ""
    return [
        {
            "kind": "no_false_success",
            "name": f"no claim of success after {error.tool} fails",
            "tool": error.tool,
        },
        _judge(
            "handles what failed in production",
            f"In production, {error.tool} answered an error ({error.message}){asked}, and the "
            f'agent told the user "{reply[:200]}". This time the agent does not claim success '
            "for a step that failed: it checks what the step needs, or tells the user plainly "
            "what failed and what they can do.",
        ),
    ]


def _amounts(text: str) -> list[float]:
    return [float(a or b) for a, b in AMOUNTS.findall(text)]


def note_checks(
    note: str, conversation: Conversation, tools: set[str], patterns: dict[str, re.Pattern[str]]
) -> list[Check]:
    """Deterministic checks for what a reviewer's note states: amounts, tools, arguments."""
    checks: list[Check] = []
    numeric = [
        (o, name, value)
        for o in conversation.observations
        for name, value in o.arguments.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    ]
    used = {float(value) for _, _, value in numeric}
    stated = _amounts(note)
    right = [a for a in stated if a not in used]
    wrong = [a for a in stated if a in used]
    for amount in right[:1]:
        if numeric:
            observation, name, _ = numeric[-1]
            args = {**key_arguments(observation.arguments, patterns), name: amount}
            checks.append(
                _called(observation.name, args, f"calls {observation.name} with {name} {amount:g}")
            )
        else:
            checks.append(
                {"kind": "text", "name": f"states {amount:.2f}", "contains": f"{amount:.2f}"}
            )
    for amount in wrong[:1]:
        observation, name, _ = next(n for n in numeric if float(n[2]) == amount)
        checks.append(
            {
                **_called(observation.name, {name: observation.arguments[name]}, ""),
                "name": f"never calls {observation.name} with {name} {amount:g}",
                "min_count": 0,
                "max_count": 0,
            }
        )
    for sentence in re.split(r"(?<=[.!?;])\s+", note):
        for tool in sorted(t for t in tools if re.search(rf"\b{re.escape(t)}\b", sentence)):
            checks += _tool_stated(tool, sentence, conversation.observations)
    return checks + _choices_stated(note, conversation, patterns)


def _choices_stated(
    note: str, conversation: Conversation, patterns: dict[str, re.Pattern[str]]
) -> list[Check]:
    """A note that names another of an argument's few allowed values (its JSON Schema `enum`)
    than the one production chose: "should be high" where production called `create_ticket`
    with `priority: normal` asks for that call with `priority: high`."""
    checks: list[Check] = []
    for observation in conversation.observations:
        for name, used in observation.arguments.items():
            allowed = conversation.choices(observation.name, name)
            stated = [
                v
                for v in allowed
                if v != used and re.search(rf"\b{re.escape(str(v))}\b", note, re.IGNORECASE)
            ]
            if len(stated) == 1:
                args = {**key_arguments(observation.arguments, patterns), name: stated[0]}
                label = f"calls {observation.name} with {name} {stated[0]}"
                checks.append(_called(observation.name, args, label))
    return checks


def _tool_stated(tool: str, sentence: str, observations: list[Observation]) -> list[Check]:
    """What a sentence of a note naming a tool asks: never to call it (a negated sentence), or
    to call it, unless production already made that very call (then the note names what went
    wrong, and a check requiring it would assert the failing call)."""
    args = _stated_arguments(sentence, observations, tool)
    if NEGATION.search(sentence):
        never = {**_called(tool, args, ""), "name": f"never calls {tool}"}
        return [{**never, "min_count": 0, "max_count": 0}]
    made = [o.arguments for o in observations if o.name == tool]
    if any(all(a.get(k) == v for k, v in args.items()) for a in made):
        return []
    return [_called(tool, args, f"calls {tool}")]


def _called(tool: str, args: dict[str, Any], name: str) -> Check:
    return {"kind": "tool_called", "name": name, "tool": tool, "args": args}


def _stated_arguments(sentence: str, observations: list[Observation], tool: str) -> Check:
    """`name=value` or `name: value` in a sentence, for argument names the tool was called with."""
    names = {k for o in observations if o.name == tool for k in o.arguments}
    found = {}
    for name in names:
        match = re.search(rf"\b{re.escape(name)}\s*[=:]\s*['\"]?([\w.@+-]+)", sentence)
        if match:
            found[name] = json_or_text(match.group(1))
    return found


def failure_checks(
    conversation: Conversation,
    failure: Failure,
    tools: set[str],
    ids: list[str],
    patterns: dict[str, re.Pattern[str]],
    hard_judges: bool = False,
) -> list[Check]:
    """Checks of the correct behaviour for a failed conversation (see the module docstring);
    judge criteria are soft unless `hard_judges`."""
    checks: list[Check] = []
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
        checks.append(_called(tool, {}, f"calls {tool}"))
    for tool in expected.get("must_not_call", []):
        checks.append({**_called(tool, {}, f"never calls {tool}"), "min_count": 0, "max_count": 0})
    seen: set[tuple[str | None, str]] = set()
    for error in failure.errors:
        if (error.tool, error.type) not in seen:
            seen.add((error.tool, error.type))
            checks += error_checks(error, conversation, ids, patterns)
    for error, reply in failure.silent:
        if (error.tool, error.type) not in seen:
            seen.add((error.tool, error.type))
            checks += silent_checks(error, reply, conversation)
    for note in failure.notes:
        checks += note_checks(note, conversation, tools, patterns)
    judges = [
        _judge(
            "avoids the reported problem",
            "A reviewer of the production conversation reported this problem: "
            f'"{text}". The agent does not make that mistake.',
        )
        for text in failure.notes + failure.labels
    ]
    if failure.unresolved or not (checks or judges):
        judges.append(
            _judge("resolves the request", "The agent correctly resolves the user's request.")
        )
    checks = [{k: v for k, v in c.items() if v != "" and v != {}} for c in _unique(checks)]
    for check in checks + judges:
        if check["kind"] == "llm_judge":
            check["hard"] = hard_judges
    return checks + judges


def _unique(checks: list[Check]) -> list[Check]:
    return list({json.dumps(c, sort_keys=True): c for c in checks}.values())


def success_checks(
    conversation: Conversation, patterns: dict[str, re.Pattern[str]], state: dict[str, Any]
) -> list[Check]:
    """Checks that keep what a conversation that went well did."""
    checks: list[Check] = []
    made = generated(conversation)
    said = " ".join(conversation.user_texts()).casefold()
    for observation in conversation.observations:
        if observation.failure is None:  # never require a call that failed
            args = {  # ids, emails, and what the user said (a username, an app's name)
                k: v
                for k, v in observation.arguments.items()
                if (is_id(v, patterns) or _said(v, said)) and v not in made
            }
            checks.append(_called(observation.name, args, f"calls {observation.name}"))
    checks = [{k: v for k, v in c.items() if v != {}} for c in _unique(checks)]
    checks += [
        {"kind": "text", "name": f"states {fact}", "contains": fact}
        for fact in facts(conversation)
        if fact not in made
    ]
    if state:
        checks.append({"kind": "state", "name": "same final state", "expect": state})
    return checks or [{"kind": "text", "name": "answers", "regex": "\\w"}]


CREATES = re.compile(
    r"^(create|open|new|add|submit|book|issue|register|insert|post|place|start|make|generate)",
    re.IGNORECASE,
)


def generated(conversation: Conversation) -> set[str]:
    """Values the server made during the session (the ticket id a `create_...` call
    returned), which a new session gets anew: a check never asserts them. A value of such a
    call's result counts unless the user or the call's arguments gave it."""
    said = " ".join(conversation.user_texts())
    made: set[str] = set()
    for observation in conversation.observations:
        if not CREATES.match(observation.name) or not isinstance(observation.result, dict):
            continue
        given = {str(v) for v in observation.arguments.values()}
        for value in observation.result.values():
            text = str(value)
            if isinstance(value, str | int) and text not in given and text not in said:
                made.add(value)
                made.add(text)
    return made


def facts(conversation: Conversation) -> list[str]:
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

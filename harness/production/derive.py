"""The checks of a task made from production: what the correct behaviour is, never what failed,
and never a value the server generated.

- An exception: the episode must finish without that exception at that tool and without an
  agent crash (`no_error`), answering about the ids the user gave; and an `llm_judge`
  criterion written from the exception and the conversation. A not-found error on a value the
  user typed (a mistyped id) gets no `no_error` at the tool: the replay raises it whatever the
  agent does, since looking the value up is how a correct agent checks it; the task asks that
  the agent tells the user the value was not found, or asks them to check it, and does not
  crash. (Handled in production, such an error is no failure at all: `failures`.)
- Negative feedback: an `llm_judge` criterion from the note, plus deterministic checks when the
  note states a value: an amount (the call it corrects, with the right amount; never the wrong
  one), a tool (called, or never called when the note says so), an argument (`name=value`),
  another of an argument's `enum` values ("should be water damage, not flood": the call with
  `coverage: water_damage`, and never with `flood`). An `expected` label states them directly
  (`answer`, `must_call`, `must_not_call`).
- A silent failure (the agent said a call succeeded when it had answered an error value):
  `no_false_success` at that tool, never a check requiring the call that failed.
- A success: outcomes, not recorded incidentals. The calls made with their key arguments (ids,
  emails, short values the user said word for word, the `enum` choices), never their free text;
  what the user was told: facts of the start state the answers stated, and, for an id the server
  generated and the agent told the user, that a reply states one of that shape (`CLM-<digits>`),
  never the value; and the final state the domain says those calls imply; never a call that
  failed.

*Generated* values (`harness.production.generated`) are never asserted: a new session gets new
ones (`without_generated`).

A judge criterion is soft unless asked for hard ones (`--judge hard`): a task never hangs on a
judge alone by default, and when no deterministic check applies it only asks for an answer.
"""

from __future__ import annotations

import json
import re
from typing import Any

from harness.jsontext import json_or_text
from harness.production.failures import Failure, not_found, typed_by_user
from harness.production.generated import generated_values, shape, word_in
from harness.production.reconstruct import Conversation, Observation, Raised
from harness.production.wording import EMAILS, names, token, told_not_found, value_pattern

AMOUNTS = re.compile(r"[$€£]\s?(\d+(?:\.\d{1,2})?)|\b(\d+\.\d{2})\b")
FREE_TEXT_WORDS = 3  # a string argument of more words is free text, never a key argument
NEGATION = re.compile(r"\b(not|never|n't|without|instead of|shouldn't|mustn't)\b", re.IGNORECASE)
Check = dict[str, Any]


def is_id(value: Any, patterns: dict[str, re.Pattern[str]]) -> bool:
    """An id the domain declares, or an email."""
    return isinstance(value, str) and (
        any(p.fullmatch(value) for p in patterns.values()) or bool(EMAILS.fullmatch(value))
    )


def _said(value: Any, said: str) -> bool:
    """A short string argument the user gave word for word (a username, an app's name; not a
    free-text summary that happens to quote the user)."""
    return (
        isinstance(value, str)
        and len(value) >= 3
        and len(value.split()) <= FREE_TEXT_WORDS
        and value.casefold() in said
    )


def key_arguments(arguments: dict[str, Any], patterns: dict[str, re.Pattern[str]]) -> Check:
    return {k: v for k, v in arguments.items() if is_id(v, patterns)}


def _judge(name: str, criterion: str) -> Check:
    return {"kind": "llm_judge", "name": name, "criterion": criterion}


def error_checks(
    error: Raised, conversation: Conversation, ids: list[str], patterns: dict[str, re.Pattern[str]]
) -> list[Check]:
    """The correct behaviour where production raised `error`."""
    typed = typed_by_user(error, conversation)
    if typed:  # the user's own mistyped value: no check at the tool could pass
        checks: list[Check] = [{"kind": "no_error", "name": "no agent crash"}]
        checks += [
            {
                "kind": "text",
                "name": f"tells the user {value} was not found, or asks to check it",
                "regex": told_not_found(value),
            }
            for value in typed[:1]
        ]
        return [*checks, _error_judge(error, conversation)]
    if error.tool:
        checks = [
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
    if error.tool and not_found(error) and failing_ids:
        checks += [
            {"kind": "text", "name": f"tells the user about {value}", "contains": value}
            for value in failing_ids[:2]
        ]
    else:
        checks += [
            {"kind": "text", "name": f"answers about {value}", "contains": value}
            for value in ids[:2]
        ] or [{"kind": "text", "name": "answers", "regex": "\\w"}]
    return [*checks, _error_judge(error, conversation)]


def _error_judge(error: Raised, conversation: Conversation) -> Check:
    users = conversation.user_texts()
    asked = f' when the user said "{users[0][:200]}"' if users else ""
    where = f"the tool {error.tool}" if error.tool else f"{error.op}"
    hint = (
        "make sure what the user named exists (look it up) before acting on it, or ask the user "
        "to confirm it"
        if not_found(error)
        else "check what that step needs before taking it"
    )
    return _judge(
        "handles what failed in production",
        f"In production, {where} raised {error.type} ({error.message}){asked}. This time "
        f"the agent does not repeat the failing step: it should {hint}, and tell the user "
        "plainly what it did or what it needs.",
    )


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
    than the one production chose, not negated: "should be high" where production called
    `create_ticket` with `priority: normal` asks for that call with `priority: high` ("water
    damage" names `water_damage`); when the note names production's value too ("..., not
    flood"), that call is never made again."""
    checks: list[Check] = []
    for observation in conversation.observations:
        for name, used in observation.arguments.items():
            allowed = conversation.choices(observation.name, name)
            stated = [
                v
                for v in allowed
                if v != used and _asserted(note, v, name) and not _negated(note, v)
            ]
            stated = [  # "water" inside "water damage" is not named on its own
                v
                for v in stated
                if not any(o != v and str(v).casefold() in str(o).casefold() for o in stated)
            ]
            if len(stated) != 1:
                continue
            args = {**key_arguments(observation.arguments, patterns), name: stated[0]}
            label = f"calls {observation.name} with {name} {stated[0]}"
            checks.append(_called(observation.name, args, label))
            if names(note, used):
                never = _called(observation.name, {name: used}, "")
                label = f"never calls {observation.name} with {name} {used}"
                checks.append({**never, "name": label, "min_count": 0, "max_count": 0})
    return checks


ASSERTING = (
    r"\b(?:be|is|are|as|under|to|into|use|choose|pick|set|means?|was|were)\s+(?:\w+\s+){0,2}"
)


def _asserted(note: str, value: Any, argument: str) -> bool:
    """Whether a note states a value as what an argument should be: after a verb that assigns
    it ("should be high", "filed as water_damage", "is water damage") or before the argument's
    name ("high priority"); a value that is a common word ("other") merely used is not."""
    pattern = value_pattern(value)
    if not pattern:
        return False
    named = rf"{ASSERTING}{pattern}(?!\w)|(?<!\w){pattern}[\s_-]+{re.escape(argument)}\b"
    return re.search(named, note, re.IGNORECASE) is not None


def _negated(note: str, value: Any) -> bool:
    """Whether a note names a value only as what it is not ("not flood", "isn't flood")."""
    pattern = value_pattern(value)
    negated = rf"\b(?:not|never|isn['\u2019]?t|wasn['\u2019]?t|no)\s+(?:\w+\s+){{0,2}}{pattern}\b"
    named = len(re.findall(rf"(?<!\w){pattern}(?!\w)", note, re.IGNORECASE))
    return named > 0 and len(re.findall(negated, note, re.IGNORECASE)) >= named


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
    conversation: Conversation,
    patterns: dict[str, re.Pattern[str]],
    state: dict[str, Any],
    known: str = "",
) -> list[Check]:
    """Checks of the outcomes of a conversation that went well (see the module docstring);
    `known`: the start state's text, whose values are facts rather than generated ones."""
    checks: list[Check] = []
    made = generated_values(conversation, known)
    said = " ".join(conversation.user_texts()).casefold()
    for observation in conversation.observations:
        if observation.failure is None:  # never require a call that failed
            args = {  # ids, emails, what the user said (a username, an app's name), choices
                k: v
                for k, v in observation.arguments.items()
                if (
                    is_id(v, patterns)
                    or _said(v, said)
                    or (v in conversation.choices(observation.name, k))
                )
                and str(v) not in made
            }
            checks.append(_called(observation.name, args, f"calls {observation.name}"))
    checks = [{k: v for k, v in c.items() if v != {}} for c in _unique(checks)]
    checks += [
        {"kind": "text", "name": f"states {fact}", "contains": fact}
        for fact in facts(conversation)
        if fact not in made
    ]
    checks += told(conversation, made)
    if state:
        checks.append({"kind": "state", "name": "same final state", "expect": state})
    return checks or [{"kind": "text", "name": "answers", "regex": "\\w"}]



def told(conversation: Conversation, made: dict[str, tuple[str, str]]) -> list[Check]:
    """For each generated id the agent's replies gave the user (a claim or ticket number), that
    a reply states one of its shape: what the user was told, without the value a new session
    does not get."""
    answers = " ".join(
        m.content for m in conversation.transcript.messages if m.role == "assistant" and m.content
    )
    checks: list[Check] = []
    for value, (tool, path) in made.items():
        pattern = shape(value)
        if pattern is None or not word_in(value, answers):
            continue
        what = f"the {path} {tool} returned" if path else f"what {tool} returned"
        checks.append({"kind": "text", "name": f"states {what}", "regex": pattern})
    return _unique(checks)[:3]


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


def without_generated(checks: list[Check], made: dict[str, tuple[str, str]]) -> list[Check]:
    """The checks without a generated value: an argument holding one is left out of its call,
    a text check stating one is dropped, and a judge criterion quoting production names the
    value's field instead (`<claim_number>`), so that no check holds one."""
    masks = [
        (re.compile(token(value)), f"<{path or 'generated'}>")
        for value, (_, path) in sorted(made.items(), key=lambda item: -len(item[0]))
    ]
    kept: list[Check] = []
    for check in checks:
        if check["kind"] == "text" and str(check.get("contains")) in made:
            continue
        if check.get("args"):
            args = {k: v for k, v in check["args"].items() if str(v) not in made}
            check = (
                {**check, "args": args} if args else {k: v for k, v in check.items() if k != "args"}
            )
        if check["kind"] == "llm_judge" and masks:
            criterion = check["criterion"]
            for pattern, mask in masks:
                criterion = pattern.sub(mask, criterion)
            check = {**check, "criterion": criterion}
        kept.append(check)
    return _unique(kept)

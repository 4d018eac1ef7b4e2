"""Rules of the `scripted` model: deterministic replies, including tool calls, for exact tests.

A script is an ordered list of rules; the first rule whose conditions hold and whose templates
can be filled gives the reply. The model reads the conversation as its own: `assistant`
messages are its own words, `user` messages the other side's (a persona's model sees the
conversation from the user's side, so there the agent's words are `user` messages).

Templates write `{name.key}` and read from: `m` (groups of `matches`), `u` (groups of `user`),
`h` (groups of `history`), `result` (the last tool result as JSON), `text` (its raw text),
`args` (the arguments of the call it answers) and `known` (a persona's known facts); a persona's
rules also read the groups of `agent_said`, `agent_history` and `i_said` under those names
(`harness.specs.persona`). A rule naming `tool`, `result` or `error` answers a tool result; any
other rule answers a conversational message.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Sequence
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, model_validator

from harness.specs.base import Shorthand, Spec
from harness.specs.located import PathKey, format_path

PLACEHOLDER = re.compile(r"\{([A-Za-z_]\w*(?:\.[\w-]+)*)\}")

# The messages a regex condition searches, newest first: the last message, the latest `user`
# message, every `user` message, or every `assistant` message (the model's own).
Searched = Literal["last", "last_user", "user_messages", "own_messages"]


def _compiles(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid regex: {exc}") from None
    return pattern


# A regular expression (Python syntax); one that does not compile is a located error.
Regex = Annotated[str, AfterValidator(_compiles)]


class ScriptedToolCall(Spec):
    """A tool call a rule makes; argument values may be templates."""

    name: str = Field(description="Tool to call.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Arguments (templates).")


class Reply(Shorthand):
    """What the model answers when a rule fires (a string is the reply's text)."""

    shorthand_field = "content"
    content: str = Field(default="", description="Text of the reply (a template).")
    tool_calls: list[ScriptedToolCall] = Field(
        default_factory=list, description="Tool calls to make."
    )

    @model_validator(mode="after")
    def _not_empty(self) -> Reply:
        if not self.content and not self.tool_calls:
            raise ValueError("a reply needs content or tool_calls")
        return self

    def placeholders(self) -> Iterator[str]:
        """Every `{name.key}` its content and tool-call arguments write, in order."""
        yield from _placeholders(self.content)
        for call in self.tool_calls:
            yield from _placeholders(call.arguments)


def _placeholders(template: Any) -> Iterator[str]:
    if isinstance(template, str):
        yield from PLACEHOLDER.findall(template)
    elif isinstance(template, dict):
        for value in template.values():
            yield from _placeholders(value)
    elif isinstance(template, list):
        for value in template:
            yield from _placeholders(value)


class When(Spec):
    """Conditions of a rule; all given conditions must hold."""

    # Each regex condition: the template name its groups fill, and the messages it searches.
    regex_conditions: ClassVar[dict[str, tuple[str, Searched]]] = {
        "matches": ("m", "last"),
        "user": ("u", "last_user"),
        "history": ("h", "user_messages"),
    }

    matches: Regex | None = Field(
        default=None,
        description="Regex searched in the last message, whatever its role (for a rule that "
        "answers a tool result, the result's text); groups become `{m.N}`.",
    )
    user: Regex | None = Field(
        default=None,
        description="Regex searched in the latest `user` message (for an agent, the simulated "
        "user's latest message, even while the agent answers a tool result); groups become "
        "`{u.N}`.",
    )
    history: Regex | None = Field(
        default=None,
        description="Regex searched in every `user` message (for an agent, everything the "
        "simulated user said; never the model's own messages), newest first: the newest that "
        "matches gives `{h.N}`.",
    )
    system: Regex | None = Field(
        default=None, description="Regex that the system prompt must match (variant behaviour)."
    )
    turn: int | None = Field(
        default=None,
        ge=1,
        description="Holds when this reply is the model's Nth `assistant` message: 1 + the "
        "assistant messages before it. Each step counts, a reply that only calls tools too, and "
        "so do the assistant messages of a task's `start.history`; when a task has no "
        "`first_message`, the greeting the persona answers is the agent's turn 1, so its first "
        "own reply is turn 2. A judge's single reply is turn 1.",
    )
    tool: str | None = Field(default=None, description="The last message is this tool's result.")
    result: dict[str, Any] | None = Field(
        default=None, description="Partial match on the last tool result parsed as JSON."
    )
    error: bool | None = Field(
        default=None, description="The last tool result is (true) or is not (false) an error."
    )

    @property
    def answers_tool(self) -> bool:
        """Whether the rule answers a tool result rather than a conversational message."""
        return self.tool is not None or self.result is not None or self.error is not None

    @property
    def is_empty(self) -> bool:
        """Whether no condition is given: the rule answers every conversational message."""
        return all(getattr(self, name) is None for name in type(self).model_fields)

    def searches(self) -> list[tuple[str, str, Searched]]:
        """The regex conditions given: (template name, regex, messages searched)."""
        return [
            (name, pattern, searched)
            for field, (name, searched) in self.regex_conditions.items()
            if (pattern := getattr(self, field)) is not None
        ]


class Rule(Spec):
    """One `when -> reply` rule."""

    when: When = Field(default_factory=When, description="Conditions; empty is the fallback.")
    reply: Reply = Field(description="The reply when the conditions hold.")


class Script(Spec):
    """A file of rules for the `scripted` model."""

    kind: Literal["script"] = Field(description="File kind.")
    description: str = Field(default="", description="What the script plays.")
    rules: list[Rule] = Field(min_length=1, description="Rules, first match wins.")


def never_firing(
    rules: Sequence[Rule], where: PathKey, sees_tools: bool = True
) -> list[tuple[PathKey, str]]:
    """Why rules can never fire, keyed by their place under `where` (for `harness validate`'s
    warnings): an earlier rule always answers first, or (`sees_tools` false: a simulated user)
    the rule answers tool results. A template naming a value the rule never has is no warning
    but a problem (`template_errors`)."""
    warnings: list[tuple[PathKey, str]] = []
    for index, rule in enumerate(rules):
        at = (*where, index)
        if rule.when.answers_tool and not sees_tools:
            message = "never fires: `tool`, `result` and `error` answer tool results, which a "
            warnings.append(((*at, "when"), message + "simulated user never sees"))
            continue
        earlier = _shadowed_by(rules, index)
        if earlier is not None:
            first = format_path((*where, earlier))
            warnings.append((at, f"never fires: {first} above answers every message it would"))
    return warnings


def template_errors(rules: Sequence[Rule], where: PathKey) -> list[tuple[PathKey, str]]:
    """The replies of rules (at `where`) whose templates name a value the rule never has
    (`template_problems`: a misspelt name, a group its regex lacks, a condition it does not
    give), keyed by their place: such a rule would silently never fire, so its file is bad
    input, refused where it is written."""
    return [
        ((*where, index, "reply"), f"never fires: {problem}")
        for index, rule in enumerate(rules)
        for problem in template_problems(rule)
    ]


def template_problems(rule: Rule) -> list[str]:
    """The placeholders of a rule's reply that can never be filled: a group its regex lacks, a
    condition it does not give, a tool result it does not answer, a name templates do not read."""
    given = {name: re.compile(pattern) for name, pattern, _ in rule.when.searches()}
    fields = {name: field for field, (name, _) in type(rule.when).regex_conditions.items()}
    problems: list[str] = []
    for placeholder in dict.fromkeys(rule.reply.placeholders()):
        root, _, rest = placeholder.partition(".")
        key = rest.split(".")[0]
        written = f"`{{{placeholder}}}`"
        if root in given:
            if key and not _has_group(given[root], key):
                problems.append(f"{written}: the `{fields[root]}` regex has no group '{key}'")
        elif root in fields:
            problems.append(f"{written} reads `{fields[root]}`, which the rule does not give")
        elif root in ("result", "args"):
            if not rule.when.answers_tool:
                problems.append(f"{written} is filled only when the rule answers a tool result")
        elif root not in ("known", "text"):
            names = [*fields, "result", "text", "args", "known"]
            close = difflib.get_close_matches(root, names, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            problems.append(f"{written}: templates read only {', '.join(names)}{hint}")
    return problems


def _has_group(regex: re.Pattern[str], key: str) -> bool:
    """Whether a match of the regex fills `{name.key}`: group 0 to N, or a named group."""
    if key.isdigit():
        return int(key) <= regex.groups
    return key in regex.groupindex


def _always_fills(rule: Rule) -> bool:
    """Whether the reply fills whenever the conditions hold: its templates read only `{text}`
    and the groups of its own regexes."""
    given = {name for name, _, _ in rule.when.searches()}
    return not template_problems(rule) and all(
        p == "text" or p.partition(".")[0] in given for p in rule.reply.placeholders()
    )


def _shadowed_by(rules: Sequence[Rule], index: int) -> int | None:
    """The first earlier rule that always answers where this one would: one without conditions
    (for a conversational rule), or one with the same conditions, whose reply always fills."""
    when = rules[index].when
    for earlier, rule in enumerate(rules[:index]):
        same = rule.when == when or (rule.when.is_empty and not when.answers_tool)
        if same and _always_fills(rule):
            return earlier
    return None

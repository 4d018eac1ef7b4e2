"""Rules of the `scripted` model: deterministic replies, including tool calls, for exact tests.

A script is an ordered list of rules; the first rule whose conditions hold and whose templates
can be filled gives the reply. Templates write `{name.key}` and read from:
`m` (groups of `matches`), `u` (groups of `user`), `h` (groups of `history`), `result` (the
last tool result as JSON),
`text` (its raw text), `args` (the arguments of the call it answers) and `known` (a persona's
known facts). A rule naming `tool`, `result` or `error` answers a tool result; any other rule
answers a conversational message.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from harness.specs.base import Shorthand, Spec


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


class When(Spec):
    """Conditions of a rule; all given conditions must hold."""

    matches: str | None = Field(
        default=None, description="Regex searched in the last message; groups become `{m.N}`."
    )
    user: str | None = Field(
        default=None,
        description="Regex searched in the latest user message; groups become `{u.N}`.",
    )
    history: str | None = Field(
        default=None,
        description="Regex searched in the user's messages, newest first; groups become `{h.N}`.",
    )
    system: str | None = Field(
        default=None, description="Regex that the system prompt must match (variant behaviour)."
    )
    turn: int | None = Field(
        default=None, ge=1, description="This is the model's Nth reply in the conversation."
    )
    tool: str | None = Field(default=None, description="The last message is this tool's result.")
    result: dict[str, Any] | None = Field(
        default=None, description="Partial match on the last tool result parsed as JSON."
    )
    error: bool | None = Field(
        default=None, description="The last tool result is (true) or is not (false) an error."
    )

    @field_validator("matches", "user", "history", "system")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"invalid regex: {exc}") from None
        return value

    @property
    def answers_tool(self) -> bool:
        """Whether the rule answers a tool result rather than a conversational message."""
        return self.tool is not None or self.result is not None or self.error is not None


class Rule(Spec):
    """One `when -> reply` rule."""

    when: When = Field(default_factory=When, description="Conditions; empty is the fallback.")
    reply: Reply = Field(description="The reply when the conditions hold.")


class Script(Spec):
    """A file of rules for the `scripted` model."""

    kind: Literal["script"] = Field(description="File kind.")
    description: str = Field(default="", description="What the script plays.")
    rules: list[Rule] = Field(min_length=1, description="Rules, first match wins.")

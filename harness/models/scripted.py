"""The `scripted` model: deterministic replies from rules, for exact and repeatable tests.

See `harness.specs.script` for the rule format. The model reads the conversation the way a real
model would (system prompt, last message, tool results), so a variant that changes its prompt
can change what a scripted agent does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from harness.jsontext import json_or_text
from harness.matching import partial_mismatches
from harness.models.base import (
    Completion,
    CompletionParams,
    ModelError,
    ProviderPolicy,
    register_provider,
)
from harness.specs.agent import ModelRef
from harness.specs.script import PLACEHOLDER, Reply, Rule, Script, Searched, When
from harness.transcript import Message, ToolCall, ToolSpec, Usage


class _Unfilled(Exception):
    """A template names a value the context does not have; the rule does not apply."""


@register_provider("scripted")
class ScriptedModel:
    """Answers with the first rule whose conditions hold and whose templates can be filled."""

    # Deterministic and free: nothing to cache or retry, no endpoint to protect.
    policy = ProviderPolicy(
        concurrency=1_000_000, cache=False, free=True, retry=False, in_process=True
    )

    def __init__(self, script: Script, variables: dict[str, Any] | None = None, name: str = ""):
        self.script = script
        self.variables = variables or {}
        self.name = name or "scripted"

    @classmethod
    def from_ref(cls, ref: ModelRef, options: dict[str, Any]) -> ScriptedModel:
        from harness.specs.load import load_script

        assert ref.script is not None  # ModelRef guarantees a script for 'scripted'
        script = load_script(Path(ref.script)).spec
        return cls(script, options.get("variables"), name=f"scripted:{Path(ref.script).stem}")

    async def complete(
        self, messages: list[Message], tools: list[ToolSpec], params: CompletionParams
    ) -> Completion:
        reply = self.reply(messages)
        words_in = sum(len(m.content.split()) for m in messages)
        words_out = len(reply.content.split()) + sum(len(c.arguments) for c in reply.tool_calls)
        usage = Usage(calls=1, input_tokens=words_in, output_tokens=words_out)
        return Completion(message=reply, usage=usage, model=self.name)

    def reply(self, messages: list[Message]) -> Message:
        """The assistant message the script gives for this conversation."""
        system = "\n".join(m.content for m in messages if m.role == "system")
        turns = [m for m in messages if m.role != "system"]
        if not turns:
            raise ModelError(f"{self.name}: nothing to answer")
        for rule in self.script.rules:
            context = self._context(rule.when, system, turns)
            if context is None:
                continue
            try:
                return self._render(rule, context, messages)
            except _Unfilled:
                continue
        last = turns[-1].content.replace("\n", " ")[:80]
        raise ModelError(f"{self.name}: no rule matches the last {turns[-1].role} message '{last}'")

    def _context(self, when: When, system: str, turns: list[Message]) -> dict[str, Any] | None:
        """The template values of a rule whose conditions hold, or None."""
        last = turns[-1]
        if when.answers_tool != (last.role == "tool"):
            return None
        context: dict[str, Any] = {"known": self.variables.get("known", {}), "text": last.content}
        if when.turn is not None and when.turn != 1 + sum(m.role == "assistant" for m in turns):
            return None
        if when.system is not None and not re.search(when.system, system):
            return None
        for name, pattern, searched in when.searches():
            found = _search(pattern, _searched(searched, turns))
            if found is None:
                return None
            context[name] = _groups(found)
        if last.role == "tool":
            if when.tool is not None and last.name != when.tool:
                return None
            if when.error is not None and last.is_error != when.error:
                return None
            result = json_or_text(last.content)
            if when.result is not None and partial_mismatches(when.result, result):
                return None
            context["result"] = result
            context["args"] = _arguments_of(turns, last.tool_call_id)
        return context

    def _render(self, rule: Rule, context: dict[str, Any], messages: list[Message]) -> Message:
        reply: Reply = rule.reply
        first_id = sum(len(m.tool_calls) for m in messages)
        calls = [
            ToolCall(
                id=f"call_{first_id + i}", name=call.name, arguments=_fill(call.arguments, context)
            )
            for i, call in enumerate(reply.tool_calls)
        ]
        return Message(role="assistant", content=_fill(reply.content, context), tool_calls=calls)


def _searched(searched: Searched, turns: list[Message]) -> list[str]:
    """The texts a regex condition searches, newest first (see `harness.specs.script.Searched`)."""
    if searched == "last":
        return [turns[-1].content]
    if searched == "last_user":
        return [next((m.content for m in reversed(turns) if m.role == "user"), "")]
    role = "user" if searched == "user_messages" else "assistant"
    return [m.content for m in reversed(turns) if m.role == role]


def _search(pattern: str, texts: list[str]) -> re.Match[str] | None:
    """The match in the first (newest) text that matches."""
    return next((found for text in texts if (found := re.search(pattern, text))), None)


def _groups(found: re.Match[str]) -> dict[str, str]:
    groups = {str(i): value or "" for i, value in enumerate([found.group(0), *found.groups()])}
    groups.update({k: v or "" for k, v in found.groupdict().items()})
    return groups


def _arguments_of(turns: list[Message], call_id: str | None) -> dict[str, Any]:
    for message in reversed(turns):
        for call in message.tool_calls:
            if call.id == call_id:
                return call.arguments
    return {}


def _lookup(context: dict[str, Any], dotted: str) -> Any:
    value: Any = context
    for part in dotted.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise _Unfilled(dotted)
    return value


def _fill(template: Any, context: dict[str, Any]) -> Any:
    """Fill `{a.b}` placeholders; a string that is one placeholder keeps the value's type."""
    if isinstance(template, dict):
        return {key: _fill(value, context) for key, value in template.items()}
    if isinstance(template, list):
        return [_fill(value, context) for value in template]
    if not isinstance(template, str):
        return template
    whole = PLACEHOLDER.fullmatch(template)
    if whole:
        return _lookup(context, whole.group(1))
    return PLACEHOLDER.sub(lambda m: _text(_lookup(context, m.group(1))), template)


def _text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return value if isinstance(value, str) else json.dumps(value)

"""Values the server generated in a session (a claim id a filing returned), found by data flow,
never by tool names: a value that first appears in a tool result (no user text, no earlier call
or result, and not the start state has it) and is echoed later (in a later call's arguments or a
reply). A new session gets new ones, so the checks of a task made from production never assert
one (`harness.production.derive`), only, at most, its shape.
"""

from __future__ import annotations

import json
import re
from typing import Any

from harness.jsontext import json_or_text
from harness.production.reconstruct import Conversation
from harness.production.wording import token

ID_TOKEN = re.compile(r"(?<![\w-])(?=[\w-]*\d)[A-Za-z0-9][\w-]{2,}(?![\w-])")
SHAPED = re.compile(r"([A-Za-z]+[-_/#.]?)+\d+")  # a prefix and a number: CLM-20481, INC3001


def _leaves(value: Any, path: str = "") -> list[tuple[str, str]]:
    """(field, value) of the identifier-like leaves of a result: strings without spaces, ids
    inside text, integers of three digits or more (amounts and words are no generated ids)."""
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in _leaves(v, str(k))]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v, path)]
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [(path, str(value))] if abs(value) >= 100 else []
    if isinstance(value, str):
        text = value.strip()
        if 3 <= len(text) <= 80 and not any(c.isspace() for c in text):
            return [(path, text)]
        return [(path, m.group()) for m in ID_TOKEN.finditer(text)]
    return []


def word_in(value: str, text: str) -> bool:
    return re.search(token(value), text, re.IGNORECASE) is not None


def generated_values(conversation: Conversation, known: str = "") -> dict[str, tuple[str, str]]:
    """Values the server generated in the session, by data flow: a value that first appears in
    a tool result (no user text, no earlier call or result, and not `known`, the start state's
    text, has it) and is echoed later, in a later call's arguments or a reply. A claim id a
    filing returned and an upload then carried is one; a tracking number a lookup read from the
    start state is not. Value -> (the tool that returned it, its field)."""
    messages = conversation.transcript.messages
    users = " ".join(conversation.user_texts())
    earlier: list[str] = []
    fresh: dict[str, tuple[int, str, str]] = {}
    for index, message in enumerate(messages):
        if message.role == "tool":
            prior = " ".join(earlier)
            for path, value in _leaves(json_or_text(message.content)):
                if value in fresh or any(word_in(value, t) for t in (users, prior, known)):
                    continue
                fresh[value] = (index, message.name or "a tool", path)
            earlier.append(message.content)
        earlier += [json.dumps(c.arguments, ensure_ascii=False) for c in message.tool_calls]
    made: dict[str, tuple[str, str]] = {}
    for value, (index, tool, path) in fresh.items():
        later = " ".join(
            part
            for m in messages[index + 1 :]
            for part in [m.content if m.role == "assistant" else ""]
            + [json.dumps(c.arguments, ensure_ascii=False) for c in m.tool_calls]
        )
        if word_in(value, later):
            made[value] = (tool, path)
    return made


def shape(value: str) -> str | None:
    """A regular expression for values shaped like `value` (a prefix and a number: CLM-20481
    gives `CLM-\\d+`), or None for another shape."""
    if not SHAPED.fullmatch(value):
        return None
    pattern = re.sub(r"\d+", lambda _: r"\d+", re.escape(value))
    return rf"(?<![\w-]){pattern}(?![\w-])"

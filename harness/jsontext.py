"""Find JSON values inside a model's free text (replies wrap JSON in prose and code fences).

One scanner for every reader of model output: the `json_schema` check, the local model's tool
calls and the judge's verdicts. It imports nothing of the harness.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

FENCED = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def json_or_text(text: str) -> Any:
    """The JSON value a text holds (a tool result, an argument), else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def json_values(
    text: str, openers: str = "{[", nested: bool = False
) -> Iterator[tuple[int, int, Any]]:
    """Each JSON value that starts at one of the `openers` characters, with its span, in order.

    After a value, scanning resumes at its end; with `nested`, it resumes just after its start,
    so values inside it are found too (for a reader that rejects the outer one)."""
    decoder = json.JSONDecoder()
    index = _next_opener(text, openers, 0)
    while index != -1:
        try:
            value, end = decoder.raw_decode(text, index)
        except ValueError:
            index = _next_opener(text, openers, index + 1)
            continue
        yield index, end, value
        index = _next_opener(text, openers, index + 1 if nested else end)


def first_json(text: str) -> Any:
    """The JSON a reply carries: a fenced block, the whole text, or its first object or array.
    Raises ValueError when there is none."""
    for candidate in [m.group(1) for m in FENCED.finditer(text)] + [text]:
        try:
            return json.loads(candidate)
        except ValueError:
            pass
    for _, _, value in json_values(text):
        return value
    raise ValueError("no JSON found")


def _next_opener(text: str, openers: str, start: int) -> int:
    """The index of the next opener character at or after `start`, or -1."""
    found = [i for i in (text.find(opener, start) for opener in openers) if i != -1]
    return min(found, default=-1)

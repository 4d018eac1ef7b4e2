"""What an episode changed in its environment: the state paths whose value differs between the
start state and the final one. The whole state is often large and mostly unchanged; the changes
are what a reader needs to see whether the agent did the right thing."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

ABSENT = object()


class StateChange(BaseModel):
    """One state path whose value the episode changed, added or removed."""

    path: str = Field(description="Dotted path of the value (`tickets.T-1004.status`).")
    before: str | None = Field(description="The start value as JSON; None when it was absent.")
    after: str | None = Field(description="The final value as JSON; None when it was removed.")


def _text(value: Any) -> str | None:
    return None if value is ABSENT else json.dumps(value, sort_keys=True, ensure_ascii=False)


def state_changes(start: dict[str, Any], final: dict[str, Any]) -> list[StateChange]:
    """Every leaf that differs, mappings compared key by key and other values whole."""
    changes: list[StateChange] = []

    def walk(path: str, before: Any, after: Any) -> None:
        if isinstance(before, dict) and isinstance(after, dict):
            for key in sorted(before.keys() | after.keys(), key=str):
                inner = f"{path}.{key}" if path else str(key)
                walk(inner, before.get(key, ABSENT), after.get(key, ABSENT))
        elif before != after:
            changes.append(StateChange(path=path, before=_text(before), after=_text(after)))

    walk("", start, final)
    return changes

"""Partial matching of JSON-like values, shared by scripted rules and state checks."""

from __future__ import annotations

from typing import Any


def partial_mismatches(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Where `actual` differs from `expected`: mappings match on the keys expected gives,
    recursively; every other value (lists included) must be equal. Empty means a match."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path or '<root>'}: expected a mapping, found {_short(actual)}"]
        problems: list[str] = []
        for key, value in expected.items():
            where = f"{path}.{key}" if path else str(key)
            if key not in actual:
                problems.append(f"{where}: missing (expected {_short(value)})")
            else:
                problems.extend(partial_mismatches(value, actual[key], where))
        return problems
    if expected != actual or (type(expected) is bool and type(actual) is not bool):
        return [f"{path or '<root>'}: expected {_short(expected)}, found {_short(actual)}"]
    return []


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."

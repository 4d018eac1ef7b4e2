"""`--set a.b=c` overrides and the deep merge of mappings (`extends:` chains, seeded state).

An override becomes the location of the values it writes, so a bad value set on the command line
is reported against the `--set` that wrote it.
"""

from __future__ import annotations

import copy
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

import yaml

from harness.defaults import YAML_MAX_DEPTH
from harness.specs.located import (
    Location,
    PathKey,
    SpecError,
    copy_data,
    format_path,
    relocate,
    too_deep,
)


def deep_merge(base: Any, override: Any) -> Any:
    """Merge mappings recursively; anything else in `override` replaces; None deletes a key.
    Neither argument is changed: the result is a copy."""
    if not isinstance(base, dict) or not isinstance(override, dict):
        return copy_data(override)
    return _merge_into(copy_data(base), override)


def merge_into(merged: Any, override: Any) -> Any:
    """`deep_merge` onto a base that is already the caller's (changed in place, and returned):
    the override's values are copied, the base is not."""
    if not isinstance(merged, dict) or not isinstance(override, dict):
        return copy_data(override)
    return _merge_into(merged, override)


def _merge_into(merged: dict[Any, Any], override: dict[Any, Any]) -> dict[Any, Any]:
    """`deep_merge` on a copy of the base that is already the caller's (copied once)."""
    for key, value in override.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            _merge_into(merged[key], value)
        else:
            merged[key] = copy_data(value)
    return merged


def command_line_value(text: str, where: Location) -> Any:
    """A value typed on the command line, read as YAML (`3` is a number, `[a]` a list, text that
    is not YAML a string). A value written as a mapping or a list (`{...}`, `[...]`) must parse
    as one: a malformed one is an error at `where`, never silently taken for a string. Nesting
    past `YAML_MAX_DEPTH` is refused before PyYAML, which would recurse past Python's limit."""
    if too_deep(text) is not None:
        raise SpecError.at(where, "", f"nested deeper than {YAML_MAX_DEPTH} levels")
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        opening = text.lstrip()[:1]
        if opening not in ("{", "["):
            return text
        mark = getattr(exc, "problem_mark", None)
        at = f" (column {mark.column + 1} of the value)" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        what = "mapping" if opening == "{" else "list"
        raise SpecError.at(where, "", f"invalid YAML {what}: {problem}{at}") from None


@dataclass(frozen=True)
class Override:
    """One `--set KEY.PATH=VALUE`: the text as the user typed it, and what it sets."""

    text: str
    keys: PathKey
    value: Any

    @classmethod
    def parse(cls, text: str) -> Override:
        """Parse `a.b.0.c=value`; the value is read as YAML (`3` is a number, `[a]` a list)."""
        key_text, sep, value_text = text.partition("=")
        where = Location(f"--set {text}")
        if not sep or not key_text.strip() or "" in key_text.strip().split("."):
            raise SpecError.at(where, "", "expected KEY.PATH=VALUE")
        value = command_line_value(value_text, where) if value_text.strip() else ""
        keys = tuple(int(k) if k.isdigit() else k for k in key_text.strip().split("."))
        return cls(text, keys, value)

    def scoped(self) -> tuple[str | int, Override]:
        """Split off the first key (a scope such as `agent` or a DAG node id)."""
        return self.keys[0], Override(self.text, self.keys[1:], self.value)

    @classmethod
    def parse_in(cls, text: str, scope: str) -> Override:
        """Parse an override that may be written with its scope (`agent.model=...`) or
        without it (`model=...`); errors still quote the text as written."""
        override = cls.parse(text)
        if override.keys[0] == scope and len(override.keys) > 1:
            return override.scoped()[1]
        return override


def apply_overrides(
    data: dict[str, Any], overrides: list[Override], positions: MutableMapping[PathKey, Location]
) -> dict[str, Any]:
    """Apply overrides to a copy of `data`; each becomes the location of the values it wrote.
    Without overrides, `data` itself (a large task's state is costly to copy)."""
    if not overrides:
        return data
    data = copy.deepcopy(data)
    for override in overrides:
        where, keys = Location(f"--set {override.text}"), override.keys
        if not keys:
            raise SpecError.at(where, "", "expected KEY.PATH=VALUE")
        parent: Any = data
        for depth, key in enumerate(keys[:-1]):
            parent = _child(parent, key, keys[: depth + 1], where)
        last = keys[-1]
        in_list = isinstance(parent, list) and isinstance(last, int) and last < len(parent)
        if in_list or isinstance(parent, dict):
            parent[last] = override.value
        elif isinstance(parent, list):
            raise SpecError.at(where, format_path(keys), "no such list item")
        else:
            kind = type(parent).__name__
            raise SpecError.at(where, format_path(keys), f"cannot set a field inside a {kind}")
        relocate(positions, keys, where)
    return data


def _child(parent: Any, key: str | int, path: PathKey, where: Location) -> Any:
    if isinstance(parent, dict):
        if key not in parent or parent[key] is None:
            parent[key] = {}
        return parent[key]
    if isinstance(parent, list) and isinstance(key, int) and key < len(parent):
        return parent[key]
    kind = type(parent).__name__
    raise SpecError.at(where, format_path(path), f"cannot set a field inside a {kind}")

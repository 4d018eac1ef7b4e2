"""YAML read with the position of every value, and the located errors built from positions.

Every problem becomes one line `file:line:col: field.path: message`; all problems of a file are
reported together in one `SpecError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

PathKey = tuple[str | int, ...]


@dataclass(frozen=True)
class Location:
    """Where a value was written: a file position, or a `--set` override."""

    source: str
    line: int | None = None
    col: int | None = None

    def __str__(self) -> str:
        if self.line is None:
            return self.source
        return f"{self.source}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Problem:
    """One located error."""

    location: Location
    path: str
    message: str

    def __str__(self) -> str:
        return (
            f"{self.location}: {self.path}: {self.message}"
            if self.path
            else (f"{self.location}: {self.message}")
        )


class SpecError(Exception):
    """One or more located problems in user input. The CLI prints them and exits with 2."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))

    @classmethod
    def at(cls, location: Location, path: str, message: str) -> SpecError:
        return cls([Problem(location, path, message)])


def display(path: Path) -> str:
    """A path as the user would write it: relative to the working folder when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def format_path(keys: PathKey) -> str:
    """`('checks', 0, 'expect')` -> `checks[0].expect`."""
    text = ""
    for key in keys:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else str(key))
    return text


def nearest(positions: dict[PathKey, Location], keys: PathKey, default: Location) -> Location:
    """The location of a value, or of its nearest written parent (a missing field has none)."""
    for end in range(len(keys), 0, -1):
        if keys[:end] in positions:
            return positions[keys[:end]]
    return default


class _Loader(yaml.SafeLoader):
    """A safe loader; positions are read off the composed node tree."""


def read_yaml(path: Path) -> tuple[Any, dict[PathKey, Location]]:
    """Parse a YAML file, returning the data and the position of every key and list item."""
    source = display(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError.at(Location(source), "", "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError.at(Location(source), "", f"cannot read file: {exc}") from None
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        positions: dict[PathKey, Location] = {}
        data = _construct(node, (), positions, loader, source) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        message = str(exc.problem or exc.context)
        if exc.context and exc.problem and exc.context_mark:
            message += f" ({exc.context} at line {exc.context_mark.line + 1})"
        raise SpecError.at(Location(source, line, col), "", f"invalid YAML: {message}") from None
    except yaml.YAMLError as exc:
        raise SpecError.at(Location(source), "", f"invalid YAML: {exc}") from None
    finally:
        loader.dispose()
    return data, positions


def _construct(
    node: yaml.Node, path: PathKey, positions: dict[PathKey, Location], loader: _Loader, src: str
) -> Any:
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            here = Location(src, key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if not isinstance(key, str | int | bool | float) or key is None:
                raise SpecError.at(here, format_path(path), "mapping keys must be plain scalars")
            if key in result:
                raise SpecError.at(here, format_path((*path, key)), f"duplicate key '{key}'")
            positions[(*path, key)] = here
            result[key] = _construct(value_node, (*path, key), positions, loader, src)
        return result
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item in enumerate(node.value):
            mark = item.start_mark
            positions[(*path, index)] = Location(src, mark.line + 1, mark.column + 1)
            items.append(_construct(item, (*path, index), positions, loader, src))
        return items
    return loader.construct_object(node, deep=True)

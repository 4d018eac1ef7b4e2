"""YAML data built straight from libyaml's parse events, in one linear pass.

PyYAML's loader first composes a node tree (a node and two marks per value, about 400 bytes
each: 200 MB for a 5 MB file) and only then builds the data; built from events, a file costs
its data only. Aliases are where a small file becomes a huge value (an alias bomb: 9 anchors of
9 aliases each stand for 387 million values in 350 bytes), so every alias is expanded as a copy
charged to a budget, and a file that spends it is refused at once.

The errors are PyYAML's (same text, same place): duplicate keys, keys that are not scalars,
undefined or duplicate anchors, several documents, unknown tags. Syntax errors come from libyaml
here; `located.read_yaml` asks PyYAML's own parser for their wording.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError, SafeConstructor

from harness.defaults import (
    YAML_MAX_ALIAS_TEXT,
    YAML_MAX_ALIAS_VALUES,
    YAML_MAX_ALIASES,
    YAML_MAX_DEPTH,
)

Parser = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's C parser when installed
PathKey = tuple[str | int, ...]

STR = "tag:yaml.org,2002:str"
MERGE = "tag:yaml.org,2002:merge"
VALUE = "tag:yaml.org,2002:value"
RESOLVERS: dict[Any, list[tuple[str, re.Pattern[str]]]] = yaml.SafeLoader.yaml_implicit_resolvers
CONSTRUCTORS = SafeConstructor.yaml_constructors
# Tags whose constructor returns the value at once (the others are collections or unknown).
SIMPLE_TAGS = frozenset(
    "tag:yaml.org,2002:" + name for name in ("null", "bool", "int", "float", "timestamp", "binary")
)
CACHE_SIZE = 4096  # distinct plain scalars whose values are remembered


class DataProblem(Exception):
    """A problem with the data rather than the syntax: `path: message` at `mark`."""

    def __init__(self, mark: Any, path: PathKey, message: str):
        super().__init__(message)
        self.mark, self.path, self.message = mark, path, message


@dataclass
class _Frame:
    """A mapping or sequence being built."""

    value: dict[Any, Any] | list[Any]
    anchor: str | None
    mark: Any
    key: Any = None
    has_key: bool = False
    merging: bool = False  # the pending value is a `<<` merge
    merges: list[dict[Any, Any]] = field(default_factory=list)  # lowest precedence first


@dataclass
class _Budget:
    """What aliases may still add to the file's data."""

    aliases: int = YAML_MAX_ALIASES
    values: int = YAML_MAX_ALIAS_VALUES
    text: int = YAML_MAX_ALIAS_TEXT


def plain_tag(value: str) -> str:
    """The tag PyYAML's resolver gives a plain (unquoted, untagged) scalar."""
    for tag, pattern in RESOLVERS.get(value[:1], []):
        if pattern.match(value):
            return tag
    return STR


class Builder:
    """Data and the first problem, from the events of one YAML text."""

    def __init__(self) -> None:
        self.constructor = SafeConstructor()
        self.cache: dict[str, Any] = {}  # plain scalar text -> its (immutable) value
        self.anchors: dict[str, tuple[Any, Any]] = {}  # name -> (value, mark)
        self.open: dict[str, Any] = {}  # anchors of collections being built -> mark
        self.budget = _Budget()
        self.stack: list[_Frame] = []
        self.root: Any = None
        self.problem: DataProblem | yaml.MarkedYAMLError | None = None  # raised at the end

    def build(self, text: str) -> Any:
        """The single document's data (None for an empty text); raises the first problem."""
        parser = Parser(text)
        try:
            get = parser.get_event
            get()  # the stream's start
            event = get()
            if isinstance(event, yaml.StreamEndEvent):
                return None
            root_mark = self._document(get)
            event = get()
            if not isinstance(event, yaml.StreamEndEvent):
                raise ComposerError(
                    "expected a single document in the stream",
                    root_mark,
                    "but found another document",
                    event.start_mark,
                )
        finally:
            parser.dispose()
        if self.problem is not None:
            raise self.problem
        return self.root

    def _document(self, get: Any) -> Any:
        """The events of one document, up to its end; the mark of its root value."""
        first = None
        while True:
            event = get()
            kind = type(event)
            if first is None:
                first = event.start_mark
            if kind is yaml.ScalarEvent:
                self._add(self._scalar(event), event, event.start_mark)
            elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                if len(self.stack) >= YAML_MAX_DEPTH:
                    message = f"nested deeper than {YAML_MAX_DEPTH} levels"
                    raise DataProblem(event.start_mark, (), message)
                if event.anchor is not None:
                    self._anchor_free(event)
                    self.open[event.anchor] = event.start_mark
                container: Any = {} if kind is yaml.MappingStartEvent else []
                self.stack.append(_Frame(container, event.anchor, event.start_mark))
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                frame = self.stack.pop()
                value = frame.value
                if frame.merges:
                    merged: dict[Any, Any] = {}
                    for source in frame.merges:
                        merged.update(source)
                    merged.update(value)
                    value = merged
                if frame.anchor is not None:
                    del self.open[frame.anchor]
                    self.anchors[frame.anchor] = (value, frame.mark)
                self._add(value, event, frame.mark)
            elif kind is yaml.AliasEvent:
                self._add(self._alias(event), event, event.start_mark)
            elif kind is yaml.DocumentEndEvent:
                return first

    def _anchor_free(self, event: Any) -> None:
        """PyYAML refuses an anchor defined twice."""
        name = event.anchor
        first = self.open.get(name) or (self.anchors[name][1] if name in self.anchors else None)
        if first is not None:
            raise ComposerError(
                f"found duplicate anchor {name!r}; first occurrence",
                first,
                "second occurrence",
                event.start_mark,
            )

    def _scalar(self, event: Any) -> Any:
        result = self.scalar_value(event)
        if event.anchor is not None:
            self._anchor_free(event)
            self.anchors[event.anchor] = (result, event.start_mark)
        return result

    def scalar_value(self, event: Any) -> Any:
        """A scalar's value, resolved and constructed as PyYAML's safe loader does."""
        tag, value = event.tag, event.value
        if tag is None or tag == "!":
            if not event.implicit[0]:
                return value
            cached = self.cache.get(value, _MISSING)
            if cached is not _MISSING:
                return cached
            tag = plain_tag(value)
        if tag == STR:
            return value
        if tag in (MERGE, VALUE):
            return _Special(tag, value)
        result = self._construct(tag, event)
        if tag in SIMPLE_TAGS and event.implicit[0] and len(self.cache) < CACHE_SIZE:
            self.cache[value] = result
        return result

    def _construct(self, tag: str, event: Any) -> Any:
        """A scalar of a non-string tag, by PyYAML's constructor; its failure is a problem."""
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        try:
            if tag in SIMPLE_TAGS:
                return CONSTRUCTORS[tag](self.constructor, node)
            return self.constructor.construct_object(node, deep=True)
        except ConstructorError as exc:
            self._defer(exc)
        except (ValueError, TypeError, OverflowError):
            message = f"invalid YAML: cannot read {event.value!r} as {tag}"
            self._defer(DataProblem(event.start_mark, (), message))
        return None

    def _defer(self, problem: DataProblem | yaml.MarkedYAMLError) -> None:
        """Keep the first data problem: PyYAML reports a syntax error anywhere before it."""
        if self.problem is None:
            self.problem = problem

    def _alias(self, event: Any) -> Any:
        name = event.anchor
        if name not in self.anchors:
            if name in self.open:
                raise DataProblem(event.start_mark, (), f"invalid YAML: recursive alias '*{name}'")
            raise ComposerError(None, None, f"found undefined alias {name!r}", event.start_mark)
        self.budget.aliases -= 1
        if self.budget.aliases < 0:
            message = f"more than {YAML_MAX_ALIASES} aliases in one file"
            raise DataProblem(event.start_mark, (), message)
        return self._copy(self.anchors[name][0], event.start_mark)

    def _copy(self, value: Any, mark: Any) -> Any:
        """A copy of an anchored value, charged to the alias budget."""
        budget = self.budget
        budget.values -= 1
        if isinstance(value, str):
            budget.text -= len(value)
        if budget.values < 0 or budget.text < 0:
            what = (
                f"{YAML_MAX_ALIAS_VALUES} values"
                if budget.values < 0
                else f"{YAML_MAX_ALIAS_TEXT // 1_000_000} MB of text"
            )
            message = f"aliases expand to more than {what}; write the data out instead"
            raise DataProblem(mark, (), message)
        if isinstance(value, dict):
            return {key: self._copy(item, mark) for key, item in value.items()}
        if isinstance(value, list):
            return [self._copy(item, mark) for item in value]
        return value

    def _add(self, value: Any, event: Any, mark: Any) -> None:
        """Put a finished value in the collection being built (or make it the root)."""
        if not self.stack:
            self.root = self._plain(value, event)
            return
        frame = self.stack[-1]
        if isinstance(frame.value, list):
            frame.value.append(self._plain(value, event))
        elif not frame.has_key:
            self._key(frame, value, mark)
        elif frame.merging:
            self._merge(frame, value, mark)
        else:
            if frame.key is not _IGNORED:
                frame.value[frame.key] = self._plain(value, event)
            frame.has_key = False

    def _plain(self, value: Any, event: Any) -> Any:
        """A `<<` or `=` anywhere but as a key is an unknown tag, as in PyYAML."""
        return self._construct(value.tag, event) if isinstance(value, _Special) else value

    def _key(self, frame: _Frame, key: Any, mark: Any) -> None:
        if isinstance(key, _Special):
            if key.tag == MERGE:
                frame.key, frame.has_key, frame.merging = "<<", True, True
                return
            key = key.text
        if not isinstance(key, str | int | float):
            self._defer(DataProblem(mark, self.path(), "mapping keys must be plain scalars"))
            key = _IGNORED
        elif key in frame.value:
            # A float key stays a float in the path, which PathKey (the spec models' keys,
            # str | int) leaves out.
            path = (*self.path(), key)
            self._defer(DataProblem(mark, path, f"duplicate key '{key}'"))  # type: ignore[arg-type]
            key = _IGNORED
        frame.key, frame.has_key = key, True

    def _merge(self, frame: _Frame, value: Any, mark: Any) -> None:
        """`<<: mapping` or `<<: [mappings]`: earlier mappings in a list win, own keys win."""
        frame.has_key = frame.merging = False
        sources = value if isinstance(value, list) else [value]
        if not all(isinstance(source, dict) for source in sources):
            problem = "expected a mapping or list of mappings for merging"
            self._defer(ConstructorError("while constructing a mapping", frame.mark, problem, mark))
            return
        frame.merges.extend(reversed(sources))

    def path(self) -> PathKey:
        """Where the mapping being built sits (for a problem's message)."""
        keys: list[str | int] = []
        for frame in self.stack[:-1]:
            if isinstance(frame.value, list):
                keys.append(len(frame.value))
            elif frame.key is not _IGNORED:
                keys.append(frame.key)
        return tuple(keys)


@dataclass(frozen=True)
class _Special:
    """A plain `<<` (merge) or `=` (value) scalar: meaningful only as a mapping key."""

    tag: str
    text: str


_IGNORED = object()  # the key of a refused entry: its value is dropped
_MISSING = object()


@dataclass
class _Place:
    """A collection met while finding positions: where it is and what comes next in it."""

    path: PathKey | None  # None: inside a key that is not a scalar (no positions there)
    mapping: bool
    index: int = 0
    key: Any = _IGNORED
    expect_key: bool = True


def key_marks(text: str) -> Iterator[tuple[PathKey, Any]]:
    """The path and mark of every mapping key and sequence item of a valid YAML text: what
    located errors point at. An alias is not followed: its own mark stands for what it holds."""
    values, parser = Builder(), Parser(text)
    stack: list[_Place] = []
    collections = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
    try:
        while True:
            event = parser.get_event()
            kind = type(event)
            if kind is yaml.StreamEndEvent:
                return
            if kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                stack.pop()
                continue
            if kind not in (yaml.ScalarEvent, yaml.AliasEvent, *collections):
                continue
            path: PathKey | None = ()
            if stack:
                top = stack[-1]
                if top.mapping and top.expect_key:
                    top.expect_key, top.key = False, _IGNORED
                    key = values.scalar_value(event) if kind is yaml.ScalarEvent else None
                    key = key.text if isinstance(key, _Special) else key
                    if isinstance(key, str | int | float) and top.path is not None:
                        top.key = key
                        # a float key too, which PathKey leaves out (see `_key`)
                        yield (*top.path, key), event.start_mark  # type: ignore[arg-type]
                    elif kind in collections:
                        stack.append(_Place(None, kind is yaml.MappingStartEvent))
                    continue
                if top.mapping:
                    top.expect_key = True
                    ok = top.path is not None and top.key is not _IGNORED
                    path = (*top.path, top.key) if ok else None  # type: ignore[misc]
                else:
                    path = (*top.path, top.index) if top.path is not None else None
                    top.index += 1
                    if path is not None:
                        yield path, event.start_mark
            if kind in collections:
                stack.append(_Place(path, kind is yaml.MappingStartEvent))
    finally:
        parser.dispose()

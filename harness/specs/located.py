"""YAML read with the position of every value, and the located errors built from positions.

Every problem becomes one line `file:line:col: field.path: message`; all problems of a file are
reported together in one `SpecError`. Files are parsed from libyaml's events (`yaml_events`);
positions are found again from the text only when a problem needs them.
"""

from __future__ import annotations

import copy
import datetime
import os
import re
import stat
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from yaml.parser import ParserError
from yaml.reader import ReaderError
from yaml.scanner import ScannerError

from harness.defaults import YAML_MAX_BYTES, YAML_MAX_DEPTH
from harness.secrets import redact
from harness.specs.yaml_events import Builder, DataProblem, key_marks

PathKey = tuple[str | int, ...]


@dataclass(frozen=True)
class Location:
    """Where a value was written: a file position, or a `--set` override."""

    source: str
    line: int | None = None
    col: int | None = None

    def __str__(self) -> str:
        source = one_line(self.source)  # a newline in a file name must not split the error
        if self.line is None:
            return source
        return f"{source}:{self.line}:{self.col}"


def one_line(text: str) -> str:
    """Text with its line breaks written as `\\n` / `\\r`, so that an error quoting it (a
    file or store path) stays one line."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


@dataclass(frozen=True)
class Problem:
    """One located error."""

    location: Location
    path: str
    message: str

    def __str__(self) -> str:
        """The problem's line, secrets masked (a message may quote a value from a state file)."""
        text = (
            f"{self.location}: {self.path}: {self.message}"
            if self.path
            else (f"{self.location}: {self.message}")
        )
        return redact(text)


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
    except (ValueError, OSError, RuntimeError):  # outside, or a symlink loop (RuntimeError)
        return str(path)


def format_path(keys: PathKey) -> str:
    """`('checks', 0, 'expect')` -> `checks[0].expect`."""
    text = ""
    for key in keys:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else str(key))
    return text


def nearest(positions: Mapping[PathKey, Location], keys: PathKey, default: Location) -> Location:
    """The location of a value, or of its nearest written parent (a missing field has none)."""
    for end in range(len(keys), 0, -1):
        if keys[:end] in positions:
            return positions[keys[:end]]
    return default


class Positions(MutableMapping[PathKey, Location]):
    """The position of every key and list item of a file, found when first asked for: only a
    file with a problem needs them, and for a large file they cost more than its data."""

    def __init__(self, find: Callable[[], dict[PathKey, Location]] | None = None):
        self._find = find
        self._found: dict[PathKey, Location] | None = None if find is not None else {}
        self._moves: list[tuple[PathKey, Location]] = []  # `relocate` calls made before

    def _all(self) -> dict[PathKey, Location]:
        if self._found is None:
            assert self._find is not None
            found = self._find()
            for keys, where in self._moves:
                relocate(found, keys, where)
            self._found = found
        return self._found

    def relocate(self, keys: PathKey, where: Location) -> None:
        """`keys` and everything below them were written at `where` (by a `--set`)."""
        if self._found is None:
            self._moves.append((keys, where))
        else:
            relocate(self._found, keys, where)

    def __getitem__(self, keys: PathKey) -> Location:
        return self._all()[keys]

    def __setitem__(self, keys: PathKey, where: Location) -> None:
        self._all()[keys] = where

    def __delitem__(self, keys: PathKey) -> None:
        del self._all()[keys]

    def __iter__(self) -> Iterator[PathKey]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


def relocate(positions: MutableMapping[PathKey, Location], keys: PathKey, where: Location) -> None:
    """Record that `keys` and everything below them were written at `where`."""
    if isinstance(positions, Positions):
        positions.relocate(keys, where)
        return
    for path in [p for p in positions if p[: len(keys)] == keys]:
        del positions[path]
    for depth in range(1, len(keys) + 1):
        positions.setdefault(keys[:depth], where)


def under(positions: Mapping[PathKey, Location], prefix: PathKey) -> Positions:
    """The positions below `prefix`, keyed from there; found only when asked for."""

    def find() -> dict[PathKey, Location]:
        size = len(prefix)
        return {k[size:]: v for k, v in positions.items() if len(k) > size and k[:size] == prefix}

    return Positions(find)


_READ: ContextVar[dict[tuple[int, int], tuple[tuple[int, ...], str, Any]] | None] = ContextVar(
    "harness_read_once", default=None
)


_T = TypeVar("_T")
_MEMO: ContextVar[dict[Any, Any] | None] = ContextVar("harness_command_memo", default=None)


@contextmanager
def read_once() -> Iterator[None]:
    """Within this block each YAML file is read and parsed once (a run reads a task file to
    plan, to check and to play it; parsing is the costly part). Unchanged files only. What is
    built from the files (a loaded suite) may be kept for the block too: `command_memo()`."""
    token, memo = _READ.set({}), _MEMO.set({})
    try:
        yield
    finally:
        _READ.reset(token)
        _MEMO.reset(memo)


def command_memo() -> dict[Any, Any] | None:
    """A dict that lives as long as the `read_once` block (one command); None outside one."""
    return _MEMO.get()


def built_once(key: Any, stamp: Callable[[], Any], build: Callable[[], _T]) -> _T:
    """What `build` makes from files, made once per command while `stamp()` (what says the
    files are unchanged) stays the same; made every time outside a `read_once` block."""
    memo = command_memo()
    if memo is None:
        return build()
    current = stamp()
    if key not in memo or memo[key][0] != current:
        memo[key] = (current, build())
    return memo[key][1]


def read_yaml(path: Path) -> tuple[Any, Positions]:
    """Parse a YAML file: its data, and the position of every key and list item (found only
    when asked for). Aliases are expanded within limits; an alias bomb is one error."""
    found = check_readable(path)
    # The file, however its path is written (a link, `..`): its device and inode, from the
    # status just read (resolving the path cost more than the rest of a cached read).
    cache, key = _READ.get(), (found.st_dev, found.st_ino)
    seen = (found.st_mtime_ns, found.st_size, found.st_ino)
    if cache is not None and key in cache and cache[key][0] == seen:
        _, text, data = cache[key]  # its name is worked out only if a position is asked for
        return copy_data(data), Positions(lambda: text_positions(text, display(path)))
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError.at(Location(display(path)), "", "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError.at(Location(display(path)), "", f"cannot read file: {exc}") from None
    data = parse_yaml(text, path)
    if cache is not None:
        cache[key] = (seen, text, data)
        data = copy_data(data)
    return data, Positions(lambda: text_positions(text, display(path)))


_NOT_FILES: tuple[tuple[Callable[[int], bool], str], ...] = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def check_readable(path: Path) -> os.stat_result:
    """A spec file's status, checked before it is opened: a FIFO or device would block the
    read or never end, a symlink loop cannot be read, and a file past `YAML_MAX_BYTES` is
    refused before it is parsed. Each is one located line."""

    def problem(message: str) -> SpecError:
        return SpecError.at(Location(display(path)), "", message)

    try:
        found = path.stat()
    except FileNotFoundError:
        raise problem("file not found") from None
    except OSError as exc:  # a symlink loop, a path too long, no permission
        raise problem(f"cannot read file: {exc.strerror}") from None
    if not stat.S_ISREG(found.st_mode):
        kind = next((name for test, name in _NOT_FILES if test(found.st_mode)), "a special file")
        raise problem(f"expected a regular YAML file, found {kind}")
    if found.st_size > YAML_MAX_BYTES:
        raise problem(f"file larger than {YAML_MAX_BYTES // 1_000_000} MB")
    return found


# Brackets and braces, outside the simplest quoted strings and comments (a cheap upper bound).
_FLOW = re.compile(r"""#[^\n]*|"(?:[^"\\\n]|\\.)*"|'[^'\n]*'|[\[\]{}\n]""")


def too_deep(text: str) -> tuple[int, int] | None:
    """The line and column where `[`/`{` nesting first passes `YAML_MAX_DEPTH`, from a cheap
    scan (no parser): PyYAML's parser takes minutes over a file 20,000 brackets deep."""
    depth, line, start = 0, 1, 0
    for match in _FLOW.finditer(text):
        char = match.group()
        if char == "\n":
            line, start = line + 1, match.end()
        elif char in "[{":
            depth += 1
            if depth > YAML_MAX_DEPTH:
                return line, match.start() - start + 1
        elif char in "]}":
            depth = max(depth - 1, 0)
    return None


def parse_yaml(text: str, path: Path) -> Any:
    """The data of one YAML document (the text of `path`); every problem one located line."""
    try:
        return Builder().build(text)
    except DataProblem as exc:
        source = display(path)  # worked out for a problem only: it resolves the path
        where = Location(source, exc.mark.line + 1, exc.mark.column + 1)
        raise SpecError.at(where, format_path(exc.path), exc.message) from None
    except (ScannerError, ParserError, ReaderError) as exc:  # libyaml's words: ask PyYAML's
        # PyYAML's parser is slow on deep nesting: say so at once
        source, deep = display(path), too_deep(text)
        if deep is not None:
            where = Location(source, *deep)
            raise SpecError.at(where, "", f"nested deeper than {YAML_MAX_DEPTH} levels") from None
        python = _pyyaml_error(text) if len(text) <= PYYAML_WORDING_LIMIT else None
        raise _yaml_problem(python or exc, text, source) from None
    except yaml.YAMLError as exc:
        raise _yaml_problem(exc, text, display(path)) from None


# PyYAML's parser takes about 2 s per MB: a larger file's syntax error keeps libyaml's words.
PYYAML_WORDING_LIMIT = 1_000_000


def _pyyaml_error(text: str) -> yaml.YAMLError | None:
    """The syntax error PyYAML's own parser finds: the wording users (and the corpus) know."""
    try:
        loader = yaml.SafeLoader(text)  # its reader checks the characters at once
        try:
            while loader.get_event() is not None:
                pass
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        return exc
    return None


def _yaml_problem(exc: yaml.YAMLError, text: str, source: str) -> SpecError:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        message = str(exc.problem or exc.context)
        if exc.context and exc.problem and exc.context_mark:
            message += f" ({exc.context} at line {exc.context_mark.line + 1})"
    elif isinstance(exc, ReaderError) and isinstance(exc.position, int):
        line = text.count("\n", 0, exc.position) + 1
        col = exc.position - text.rfind("\n", 0, exc.position)
        message = str(exc).splitlines()[0]
    else:
        line, col, message = None, None, str(exc).splitlines()[0]
    return SpecError.at(Location(source, line, col), "", f"invalid YAML: {message}")


def text_positions(text: str, source: str) -> dict[PathKey, Location]:
    """The position of every key and list item of a valid YAML (or JSON) text."""
    return {
        keys: Location(source, mark.line + 1, mark.column + 1) for keys, mark in key_marks(text)
    }


_IMMUTABLE = frozenset({str, int, float, bool, type(None), datetime.date, datetime.datetime})


def copy_data(data: Any) -> Any:
    """A deep copy of plain data (what YAML and JSON give): dicts and lists are copied, scalars
    shared, anything else deep-copied. About three times as fast as `copy.deepcopy` on such
    data, for copies made per task or per episode (a parsed file, an environment's state):
    each container is first copied whole (`dict.copy`, the same size, in C), then only its
    containers and other mutable values are replaced by their copies."""
    kind = type(data)
    if kind is dict:
        copied = data.copy()
        for key, value in copied.items():  # replacing values, not keys: the dict keeps its size
            if type(value) not in _IMMUTABLE:
                copied[key] = copy_data(value)
        return copied
    if kind is list:
        copied = data[:]
        for n, value in enumerate(copied):
            if type(value) not in _IMMUTABLE:
                copied[n] = copy_data(value)
        return copied
    return data if kind in _IMMUTABLE else copy.deepcopy(data)

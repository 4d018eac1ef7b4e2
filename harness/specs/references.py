"""References from a spec file to other files: `extends:` chains, files named relative to the
file that names them, JSON data files, and the folders expanded on the command line.

A relative reference is resolved against the file that wrote it (not the working folder), so a
spec reads the same from wherever the harness is run.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.specs.kinds import expect_kind, read_mapping
from harness.specs.located import (
    Location,
    PathKey,
    Positions,
    SpecError,
    built_once,
    command_memo,
    copy_data,
    display,
    format_path,
    nearest,
    text_positions,
)
from harness.specs.overrides import deep_merge

YAML_SUFFIXES = (".yaml", ".yml")


def resolve_file(
    base: Path, data: dict[str, Any], keys: PathKey, positions: Mapping[PathKey, Location]
) -> None:
    """Resolve a relative file reference in place, against the file that wrote it."""
    parent: Any = data
    for key in keys[:-1]:
        if isinstance(parent, list) and isinstance(key, int) and key < len(parent):
            parent = parent[key]
        else:
            parent = parent.get(key) if isinstance(parent, dict) else None
    if not isinstance(parent, dict) or not isinstance(parent.get(keys[-1]), str):
        return
    reference, suffix = parent[keys[-1]], ""
    if keys[-1] in ("entry", "domain"):  # 'file.py:Name' names a file; 'package.module:Name' and
        # a registered domain name do not
        reference, _, function = reference.rpartition(":")
        if not reference.endswith(".py"):
            return
        suffix = f":{function}"
    def problem(message: str) -> SpecError:  # where it was written: found only for an error
        where = nearest(positions, keys, Location(display(base), 1, 1))
        return SpecError.at(where, format_path(keys), message)

    target, unreadable = readable_file(base.parent / reference)
    if unreadable is not None:
        raise problem(unreadable)
    parent[keys[-1]] = f"{target}{suffix}"


def readable_file(named: Path) -> tuple[Path, str | None]:
    """The file a path names (links resolved), and why it cannot be read (None when it can).
    Found once per command (`built_once`): every task of a suite may name the same file."""
    return built_once(("readable_file", str(named)), lambda: None, lambda: _readable_file(named))


def _readable_file(named: Path) -> tuple[Path, str | None]:
    try:  # a symlink loop is a RuntimeError before Python 3.13, an OSError (ELOOP) after
        target = named.resolve()
        if not target.is_file():
            return target, f"file not found: {display(target)}"
    except (OSError, RuntimeError, ValueError) as exc:
        return named, unreadable_file(named, exc)
    if not os.access(target, os.R_OK):
        return target, f"cannot read {display(target)}: permission denied"
    return target, None


def unreadable_file(path: Path, exc: BaseException) -> str:
    """Why a file a spec names cannot be read, in a few words naming it: a symlink loop, a
    path too long, no permission (never a traceback)."""
    if isinstance(exc, RuntimeError) or getattr(exc, "errno", None) == errno.ELOOP:
        return f"cannot read {display(path)}: a symlink loop"
    if isinstance(exc, OSError) and exc.strerror:
        return f"cannot read {display(path)}: {exc.strerror}"
    return f"cannot read {display(path)}: {exc}"


def read_extends(
    path: Path, kind: str, file_keys: tuple[PathKey, ...]
) -> tuple[dict[str, Any], dict[PathKey, Location]]:
    """A file merged over the chain of files it `extends:` (child values win), with the positions
    of every value. `file_keys` (which must include `("extends",)`) are resolved against the file
    that wrote them; `extends` keeps the file's own value."""
    chain: list[tuple[dict[str, Any], Positions]] = []
    seen: list[Path] = []
    current: Path | None = path
    while current is not None:
        if current.resolve() in seen:
            cycle = " -> ".join(display(p) for p in [*seen, current.resolve()])
            where = chain[-1][1].get(("extends",), Location(display(seen[-1]), 1, 1))
            raise SpecError.at(where, "extends", f"cycle: {cycle}")
        seen.append(current.resolve())
        data, positions = read_mapping(current)
        expect_kind(current, data, positions, kind)
        for keys in file_keys:
            resolve_file(current, data, keys, positions)
        chain.append((data, positions))
        parent = data.get("extends")
        current = Path(parent) if isinstance(parent, str) else None

    merged: dict[str, Any] = {}
    merged_positions: dict[PathKey, Location] = {}
    for data, positions in reversed(chain):
        merged = deep_merge(merged, data)
        merged_positions.update(positions)
    merged["extends"] = chain[0][0].get("extends")
    return merged, merged_positions


def read_json(path: Path, copy: bool = True) -> Any:
    """Read a JSON data file, with the same located errors as YAML; within one command
    (`read_once`) an unchanged file is parsed once (every task of a suite may name the same
    state file). `copy=False` gives the parsed data itself, shared with every other reader of
    the command: the caller must not change it."""
    if command_memo() is None:
        return _read_json(path)
    try:
        stat = path.stat()
    except OSError:
        return _read_json(path)  # its own located error
    data = built_once(
        ("json", str(path.resolve())),
        lambda: (stat.st_mtime_ns, stat.st_size),
        lambda: _read_json(path),
    )
    return copy_data(data) if copy else data


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError.at(Location(display(path)), "", "file not found") from None
    except (OSError, RuntimeError) as exc:  # a symlink loop, a folder, no permission
        raise SpecError.at(Location(display(path)), "", unreadable_file(path, exc)) from None
    except UnicodeDecodeError as exc:
        where = Location(display(path))
        raise SpecError.at(where, "", f"not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        where = Location(display(path), exc.lineno, exc.colno)
        raise SpecError.at(where, "", f"invalid JSON: {exc.msg}") from None


def json_positions(path: Path) -> Positions:
    """The position of every key and list item of a JSON file, found when first asked for (only
    a problem needs them): JSON is written in YAML's flow style, so YAML's events give them.
    A file they cannot be found in (unreadable, or JSON that YAML reads otherwise) has none,
    and a problem in it is put at its start."""

    def find() -> dict[PathKey, Location]:
        try:
            return text_positions(path.read_text(encoding="utf-8"), display(path))
        except Exception:  # libyaml raises several types; positions are a help, not a need
            return {}

    return Positions(find)


def check_paths(paths: list[Path]) -> None:
    """Task files and folders named on a command line or to `load_suite` that cannot be read
    at all (a symlink loop, a name too long): a `SpecError` naming each, as reading it would,
    before anything looks for the folders around them."""
    problems = []
    for path in paths:
        try:
            path.stat()
        except FileNotFoundError:
            continue  # `spec_files` names it
        except (OSError, RuntimeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            problems.extend(
                SpecError.at(Location(str(path)), "", f"cannot read file: {why}").problems
            )
    if problems:
        raise SpecError(problems)


NOT_SPECS = frozenset({"harness.yaml"})
"""YAML files a folder holds that are no spec: the project file (`harness.project`'s)."""


def spec_files(paths: list[Path]) -> list[Path]:
    """Expand files and folders into the YAML files they hold, sorted, without duplicates. In
    a folder, hidden folders (`.harness/`, `.venv/`, `.github/`) and the project file are
    passed over, so that `harness validate .` in a project checks its specs only."""
    found: dict[Path, None] = {}
    for path in paths:
        if path.is_dir():
            for file in sorted(path.rglob("*")):
                inside = file.relative_to(path).parts
                hidden = any(part.startswith(".") for part in inside[:-1])
                if hidden or file.name in NOT_SPECS:
                    continue
                if file.suffix in YAML_SUFFIXES and file.is_file():
                    found.setdefault(file, None)
        elif path.exists() or path.is_symlink():  # a FIFO or a symlink loop: read_yaml says
            found.setdefault(path, None)
        else:
            raise SpecError.at(Location(display(path)), "", "no such file or folder")
    return list(found)

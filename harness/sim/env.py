"""A task's start state (the environment over it is `harness.domains.trace_replay.
make_environment`, shared with the gold replay of `end_state` checks).

A start state may come from a JSON file, from a SQLite snapshot of production data, and from
inline values, merged in that order. A snapshot maps onto the state like this:
- a table named `_state` with columns (key, value) holds the top-level scalars;
- a table with a primary key becomes a mapping from that key to the rest of each row;
- a table without one becomes a list of rows;
- text that holds a JSON object or array is decoded, and NULL columns are left out.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from harness.specs.located import copy_data
from harness.specs.overrides import merge_into
from harness.specs.references import read_json
from harness.specs.task import Task

SCALARS_TABLE = "_state"


def initial_state(task: Task, shared: bool = False) -> dict[str, Any]:
    """The start state: the state file, then the snapshot, then inline `state` over both,
    copied once. With `shared`, a state that is one file alone is the command's parse of it
    (`read_json(copy=False)`), not a copy: the caller must not change it."""
    start = task.start
    parts: list[Any] = []
    if start.state_file:
        parts.append(read_json(Path(start.state_file), copy=not shared))
    if start.state_db:
        parts.append(read_snapshot(Path(start.state_db)))
    if start.state or not parts:
        parts.append(start.state)
    if len(parts) == 1:  # a file read as asked, or a fresh snapshot, or the task's own state
        only = parts[0]
        return copy_data(only) if only is start.state and not shared else only
    state: dict[str, Any] = {}
    for part in parts:
        state = merge_into(state, part)
    return state


def _decode(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def read_snapshot(path: Path) -> dict[str, Any]:
    """A state from a SQLite snapshot (read-only; the file is never modified)."""
    if not path.is_file():
        raise FileNotFoundError(f"no such snapshot: {path}")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        state: dict[str, Any] = {}
        tables = [
            row[0]
            for row in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                " ORDER BY name"
            )
        ]
        for table in tables:
            quoted = '"' + table.replace('"', '""') + '"'
            columns = db.execute(f"PRAGMA table_info({quoted})").fetchall()
            names = [c[1] for c in columns]
            keys = [c[1] for c in sorted(columns, key=lambda c: c[5]) if c[5]]
            rows = [
                {
                    name: _decode(value)
                    for name, value in zip(names, row, strict=True)
                    if value is not None
                }
                for row in db.execute(f"SELECT * FROM {quoted} ORDER BY rowid")
            ]
            if table == SCALARS_TABLE:
                state.update({row["key"]: row["value"] for row in rows})
            elif len(keys) == 1:
                state[table] = {row.pop(keys[0]): row for row in rows}
            else:
                state[table] = rows
        return state
    finally:
        db.close()


def write_snapshot(state: dict[str, Any], path: Path) -> None:
    """Write a state as a SQLite snapshot that `read_snapshot` reads back unchanged."""
    db = sqlite3.connect(path)
    try:
        with db:
            db.execute(f"CREATE TABLE {SCALARS_TABLE} (key TEXT PRIMARY KEY, value)")
            for key, value in state.items():
                if isinstance(value, dict) and all(isinstance(v, dict) for v in value.values()):
                    columns = sorted({c for row in value.values() for c in row})
                    _create(db, key, ["id", *columns], primary="id")
                    for row_id, row in value.items():
                        _insert(db, key, ["id", *columns], [row_id, *(row.get(c) for c in columns)])
                elif isinstance(value, list) and all(isinstance(v, dict) for v in value):
                    columns = sorted({c for row in value for c in row}) or ["value"]
                    _create(db, key, columns)
                    for row in value:
                        _insert(db, key, columns, [row.get(c) for c in columns])
                else:
                    db.execute(f"INSERT INTO {SCALARS_TABLE} VALUES (?, ?)", (key, _encode(value)))
    finally:
        db.close()


def _encode(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, dict | list) else value


def _create(db: sqlite3.Connection, table: str, columns: list[str], primary: str = "") -> None:
    spec = ", ".join(f'"{c}"' + (" TEXT PRIMARY KEY" if c == primary else "") for c in columns)
    db.execute(f'CREATE TABLE "{table}" ({spec})')


def _insert(db: sqlite3.Connection, table: str, columns: list[str], values: list[Any]) -> None:
    names = ", ".join(f'"{c}"' for c in columns)
    marks = ", ".join("?" * len(columns))
    db.execute(f'INSERT INTO "{table}" ({names}) VALUES ({marks})', [_encode(v) for v in values])

"""The SQLite file of the local trace store: its tables, a connection shared by weave's writer
threads, and how values are stored (times as integer microseconds, op names by short name)."""

from __future__ import annotations

import datetime
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.sqlite import connect

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    project_id TEXT NOT NULL, id TEXT NOT NULL, trace_id TEXT, parent_id TEXT,
    thread_id TEXT, turn_id TEXT, op_name TEXT, op_short TEXT, display_name TEXT,
    started_at INTEGER, ended_at INTEGER, attributes TEXT, inputs TEXT, output TEXT,
    summary TEXT, exception TEXT, wb_user_id TEXT, wb_run_id TEXT, wb_run_step INTEGER,
    wb_run_step_end INTEGER,
    PRIMARY KEY (project_id, id)
);
CREATE INDEX IF NOT EXISTS calls_started ON calls (project_id, started_at);
CREATE INDEX IF NOT EXISTS calls_trace ON calls (project_id, trace_id);
CREATE INDEX IF NOT EXISTS calls_parent ON calls (project_id, parent_id);
CREATE INDEX IF NOT EXISTS calls_op ON calls (project_id, op_short);
CREATE TABLE IF NOT EXISTS objects (
    project_id TEXT NOT NULL, object_id TEXT NOT NULL, digest TEXT NOT NULL,
    version_index INTEGER NOT NULL, kind TEXT NOT NULL, base_object_class TEXT,
    leaf_object_class TEXT, val TEXT NOT NULL, created_at INTEGER NOT NULL,
    PRIMARY KEY (project_id, object_id, digest)
);
CREATE TABLE IF NOT EXISTS files (
    project_id TEXT NOT NULL, digest TEXT NOT NULL, content BLOB NOT NULL,
    PRIMARY KEY (project_id, digest)
);
CREATE TABLE IF NOT EXISTS tables (
    project_id TEXT NOT NULL, digest TEXT NOT NULL, row_digests TEXT NOT NULL,
    PRIMARY KEY (project_id, digest)
);
CREATE TABLE IF NOT EXISTS table_rows (
    project_id TEXT NOT NULL, digest TEXT NOT NULL, val TEXT NOT NULL,
    PRIMARY KEY (project_id, digest)
);
CREATE TABLE IF NOT EXISTS feedback (
    project_id TEXT NOT NULL, id TEXT NOT NULL, weave_ref TEXT NOT NULL,
    created_at INTEGER NOT NULL, row TEXT NOT NULL,
    PRIMARY KEY (project_id, id)
);
CREATE INDEX IF NOT EXISTS feedback_ref ON feedback (project_id, weave_ref);
"""
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


class LocalTraceDb:
    """The store's file. The weave client calls the server from its background threads, so one
    connection is shared under a lock; WAL mode lets other processes read the file while this one
    writes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db = connect(path, check_same_thread=False, isolation_level=None)
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        """Close the database; the server is unusable afterwards."""
        with self._lock:
            self._db.close()

    def _write(self, sql: str, params: Sequence[Any]) -> None:
        with self._lock:
            self._db.execute(sql, params)

    def _read(self, sql: str, params: Sequence[Any]) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()


def micros(value: str | datetime.datetime | None) -> int | None:
    """A timestamp as integer microseconds since the epoch: exact, and sorts in SQL."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    return (value - _EPOCH) // datetime.timedelta(microseconds=1)


def from_micros(value: int) -> datetime.datetime:
    """The datetime `micros` stored."""
    return _EPOCH + datetime.timedelta(microseconds=value)


def op_short(op_name: str) -> str:
    """The op's name from its ref `weave:///entity/project/op/<name>:<digest>`."""
    return op_name.rsplit("/", 1)[-1].rsplit(":", 1)[0]

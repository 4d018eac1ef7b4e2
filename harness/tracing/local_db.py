"""The SQLite file of the local trace store: its tables, a connection shared by weave's writer
threads, and how values are stored (times as integer microseconds, op names by short name).

The store survives a process killed mid-call (`kill -9`, a crash, a lost machine): each open
registers a *writer* (host, pid and the process's start time) and every call records its writer.
When the store is opened again, the calls still open of a writer whose process is gone are closed
as interrupted: ended at the writer's last sign of life, status `interrupted`, with an
`Interrupted` exception saying so. A writer on another host is left alone (it cannot be asked).
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.sqlite import connect, write

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    project_id TEXT NOT NULL, id TEXT NOT NULL, trace_id TEXT, parent_id TEXT,
    thread_id TEXT, turn_id TEXT, op_name TEXT, op_short TEXT, display_name TEXT,
    started_at INTEGER, ended_at INTEGER, attributes TEXT, inputs TEXT, output TEXT,
    summary TEXT, exception TEXT, wb_user_id TEXT, wb_run_id TEXT, wb_run_step INTEGER,
    wb_run_step_end INTEGER, writer TEXT,
    PRIMARY KEY (project_id, id)
);
CREATE TABLE IF NOT EXISTS writers (
    id TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL, process_start TEXT,
    opened_at INTEGER NOT NULL
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
INTERRUPTED = "interrupted"  # the status of a call its recording process never finished
INTERRUPTED_TYPE = "Interrupted"


class LocalTraceDb:
    """The store's file. The weave client calls the server from its background threads, so one
    connection is shared under a lock; WAL mode lets other processes read the file while this one
    writes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db = connect(path, check_same_thread=False, isolation_level=None)
        self._db.executescript(_SCHEMA)
        columns = {row["name"] for row in self._db.execute("PRAGMA table_info(calls)")}
        if "writer" not in columns:  # a store made before writers were recorded
            self._db.execute("ALTER TABLE calls ADD COLUMN writer TEXT")
        self._db.execute("CREATE INDEX IF NOT EXISTS calls_writer ON calls (writer, ended_at)")
        self.writer = uuid.uuid4().hex
        self._close_interrupted()
        self._db.execute(
            "INSERT INTO writers (id, host, pid, process_start, opened_at) VALUES (?, ?, ?, ?, ?)",
            (
                self.writer,
                socket.gethostname(),
                os.getpid(),
                _process_start(os.getpid()),
                now_micros(),
            ),
        )

    def close(self) -> None:
        """Close the database (calls this process left open are interrupted); the server is
        unusable afterwards."""
        with self._lock:
            self._interrupt(self.writer, "the trace store was closed before the call ended")
            self._db.close()

    def _close_interrupted(self) -> None:
        """Close the open calls of every writer of this host whose process is gone."""
        host = socket.gethostname()
        for row in self._db.execute("SELECT * FROM writers WHERE host = ?", (host,)).fetchall():
            if not _alive(row["pid"], row["process_start"]):
                why = f"the process that recorded it (pid {row['pid']}) ended before the call did"
                self._interrupt(row["id"], why)

    def _interrupt(self, writer: str, why: str) -> None:
        """End the writer's open calls as interrupted and forget the writer."""
        [last] = self._db.execute(
            "SELECT MAX(MAX(started_at, COALESCE(ended_at, 0))) FROM calls WHERE writer = ?",
            (writer,),
        ).fetchone()
        self._db.execute(
            "UPDATE calls SET ended_at = MAX(started_at, ?), exception = ?, summary = ?"
            " WHERE writer = ? AND ended_at IS NULL AND op_name IS NOT NULL",
            (
                last or 0,
                json.dumps({"type": INTERRUPTED_TYPE, "message": why}),
                json.dumps({INTERRUPTED: True}),
                writer,
            ),
        )
        self._db.execute("DELETE FROM writers WHERE id = ?", (writer,))

    def _write_batch(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        """Run statements with their values, in order, in one transaction (for `local_writer`,
        which writes without a weave client: not part of the trace-server interface)."""

        def work(db: sqlite3.Connection) -> None:
            for statement, values in statements:
                db.execute(statement, values)

        with self._lock:
            write(self._db, work)

    def _save_op(
        self, project: str, name: str, digest: str, value: str, code: tuple[str, bytes]
    ) -> None:
        """An op object and its code file, as weave saves them (once: content-addressed)."""
        self._write_batch(
            [
                (
                    "INSERT OR IGNORE INTO files (project_id, digest, content) VALUES (?, ?, ?)",
                    (project, *code),
                ),
                (
                    "INSERT OR IGNORE INTO objects (project_id, object_id, digest, version_index,"
                    " kind, val, created_at) VALUES (?, ?, ?, (SELECT COUNT(*) FROM objects WHERE"
                    " project_id = ? AND object_id = ?), 'op', ?, ?)",
                    (project, name, digest, project, name, value, now_micros()),
                ),
            ]
        )

    def _write(self, sql: str, params: Sequence[Any]) -> None:
        with self._lock:
            self._db.execute(sql, params)

    def _read(self, sql: str, params: Sequence[Any]) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()


def now_micros() -> int:
    """Now, as the store keeps times (integer microseconds since the epoch)."""
    return time.time_ns() // 1000


def _process_start(pid: int) -> str | None:
    """When a process started (Linux: clock ticks since boot), to tell a reused pid apart."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


def _alive(pid: int, process_start: str | None) -> bool:
    """Whether the process that registered a writer still runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: it exists
    except OSError:
        return False
    if process_start is None:
        return True
    return _process_start(pid) == process_start


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

"""The one way the harness opens its SQLite files (results, response cache, trace store), and
writes to a file that several processes share."""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

BUSY_TIMEOUT_S = 30
"""How long one statement waits for another process's lock before SQLite gives up."""
WRITE_DEADLINE_S = 600
"""How long a write keeps retrying while other processes hold the file (then it fails)."""


class StoreBusy(Exception):
    """Other processes held the file's write lock past `WRITE_DEADLINE_S`."""


def connect(path: Path, **options: Any) -> sqlite3.Connection:
    """A connection in WAL mode: readers never block the writer, and several processes (a
    resumed run, `harness runs list`) may use the file at once. Rows are `sqlite3.Row`, read by
    column name, so that a query's columns can change without shifting every reader."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, **{"timeout": BUSY_TIMEOUT_S, **options})
    db.row_factory = sqlite3.Row
    # Two processes creating the file at once both switch it to WAL; one may find it locked.
    retrying(lambda: db.execute("PRAGMA journal_mode=WAL").fetchone())
    db.execute("PRAGMA synchronous=NORMAL")
    return db


def is_busy(exc: BaseException) -> bool:
    """Whether an error means another process holds a lock (worth waiting for)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


def retrying(work: Callable[[], T], deadline_s: float = WRITE_DEADLINE_S) -> T:
    """Run `work` again, after a short growing pause, while it fails on another process's lock
    (SQLite's own busy wait does not cover every case, e.g. a lock taken while starting)."""
    end, pause = time.monotonic() + deadline_s, 0.005
    while True:
        try:
            return work()
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
            if time.monotonic() > end:
                raise StoreBusy(f"the file stayed locked by other processes: {exc}") from None
        time.sleep(pause * (1 + random.random()))
        pause = min(pause * 2, 0.5)


def write(db: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    """Run `work` in one short write transaction on a connection in autocommit mode
    (`isolation_level=None`). `BEGIN IMMEDIATE` takes the write lock first: a transaction that
    read before writing would fail, past any busy timeout, once another process had written in
    between. Retried whole while another process holds the lock."""

    def attempt() -> T:
        db.execute("BEGIN IMMEDIATE")
        try:
            result = work(db)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return result

    return retrying(attempt)

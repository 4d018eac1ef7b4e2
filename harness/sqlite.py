"""The one way the harness opens its SQLite files (results, response cache, trace store)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any


def connect(path: Path, **options: Any) -> sqlite3.Connection:
    """A connection in WAL mode: readers never block the writer, and several processes (a
    resumed run, `harness runs list`) may use the file at once. Rows are `sqlite3.Row`, read by
    column name, so that a query's columns can change without shifting every reader."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, **{"timeout": 30, **options})
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    return db

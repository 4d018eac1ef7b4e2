"""What the results store asks of a database, and its SQLite backend (the default).

The store writes its SQL once, with `?` parameters, in the dialect both backends read; a
backend runs it, wraps a write in one short transaction, serialises writers of one key
(`lock`), and holds a pipeline's lock for the life of its process. The PostgreSQL backend
(`harness.store.postgres`) is imported only for a `postgresql://` store, so that SQLite users
never load a database driver.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol, TypeVar

from harness.specs.located import Location, SpecError
from harness.sqlite import StoreBusy, connect, write
from harness.store.lock import pipeline_lock, work_lock
from harness.store.schema import SCHEMA_VERSION, TABLES, upgrade
from harness.store_location import StoreLocation

T = TypeVar("T")

Row = Any
"""A row read by column name: `sqlite3.Row`, or psycopg's dict row."""


class Rows(Protocol):
    """The result of a statement: its rows, one at a time or all at once."""

    def fetchone(self) -> Row | None: ...

    def fetchall(self) -> list[Row]: ...

    def __iter__(self) -> Iterator[Row]: ...


class Database(Protocol):
    """One connection to a results database, as the store uses it."""

    dialect: str  # "sqlite" or "postgresql": the schema's types (`schema.statements`)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        """Run one statement (`?` parameters); outside `write`, a read of committed data."""
        ...

    def write(self, work: Callable[[Database], T]) -> T:
        """Run `work` in one short write transaction, retried whole while others hold locks."""
        ...

    def lock(self, key: str) -> None:
        """Inside `write`: wait until no other writer holds `key`, then hold it until commit
        (a read-then-write, such as claiming a node's run, is then done once)."""
        ...

    def pipeline_lock(self, pipeline_id: str) -> AbstractContextManager[None]:
        """Held while a pipeline runs; refused (bad input) while another process holds it,
        released when this one ends however it ends."""
        ...

    def work_lock(self, name: str) -> AbstractContextManager[None]:
        """Held while this process does a piece of work (plays a run); another process asking
        for it waits; released when this one ends however it ends."""
        ...

    def close(self) -> None: ...


def open_database(location: StoreLocation) -> Database:
    """The backend of a location, opened at this harness's schema version."""
    if location.is_postgres:
        from harness.store.postgres import PostgresDatabase

        return PostgresDatabase(location)
    return SqliteDatabase(location.path)


class SqliteDatabase:
    """A results file: WAL, `BEGIN IMMEDIATE` writes (which already exclude every other
    writer, so `lock` has nothing to add), and a lock file beside it for pipelines."""

    dialect = "sqlite"

    def __init__(self, path: Path):
        self.path = path
        self.connection = open_results(path)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self.connection.execute(sql, params)

    def write(self, work: Callable[[Database], T]) -> T:
        return write(self.connection, lambda _: work(self))

    def lock(self, key: str) -> None:
        """Nothing to do: the transaction holds the file's write lock."""

    def pipeline_lock(self, pipeline_id: str) -> AbstractContextManager[None]:
        return pipeline_lock(self.path, pipeline_id)

    def work_lock(self, name: str) -> AbstractContextManager[None]:
        return work_lock(self.path, name)

    def close(self) -> None:
        self.connection.close()


def open_results(path: Path) -> sqlite3.Connection:
    """Open (or create) a results file at this harness's schema version. A file that is not a
    results store (a folder, text, another SQLite file) or cannot be opened is bad input: one
    line naming it, and the file is left as it was. A file at the current version is opened
    without writing, so that readers beside a running pipeline never wait for its lock."""
    where = Location(str(path))
    if path.is_dir():
        raise SpecError.at(where, "", "not a results store: it is a folder")
    try:
        db = connect(path, isolation_level=None)
    except (sqlite3.Error, OSError) as exc:
        raise SpecError.at(where, "", f"cannot open the results store: {_reason(exc)}") from None
    try:
        if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            write(db, lambda db: _upgrade(db, where))
    except (SpecError, StoreBusy):
        db.close()
        raise
    except sqlite3.Error as exc:
        db.close()
        raise SpecError.at(where, "", f"not a results store: {_reason(exc)}") from None
    return db


def _upgrade(db: sqlite3.Connection, where: Location) -> None:
    """Create the tables of a new file, or upgrade an older one (in one write transaction, so
    that two processes opening a new file do it once)."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if version == 0 and tables - TABLES - {"sqlite_sequence"}:
        others = ", ".join(sorted(tables - TABLES))
        raise SpecError.at(where, "", f"not a results store: it holds other tables ({others})")
    upgrade(lambda sql: db.execute(sql), "sqlite", version, where)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")


def _reason(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__

"""The PostgreSQL backend of the results store: one database that CI runners on several
machines append to at once, with the same answers as a SQLite file.

Reads run outside transactions (autocommit), each write is one short transaction, and where
the store reads before it writes (claiming a node's run, adding to a run's configuration) a
transaction-scoped advisory lock on the key makes the pair atomic across processes. A pipeline
is held by a session advisory lock on its id, on a connection of its own that lives as long as
the pipeline: the server releases it when the process ends, `kill -9` included.

psycopg is imported here only, and this module only for a `postgresql://` store.
"""

from __future__ import annotations

import hashlib
import random
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

from harness.secrets import MASK, redact, url_passwords
from harness.specs.located import Location, SpecError
from harness.sqlite import WRITE_DEADLINE_S
from harness.store.schema import SCHEMA_VERSION, TABLES, upgrade
from harness.store_location import StoreLocation

if TYPE_CHECKING:
    import psycopg

    from harness.store.database import Database

T = TypeVar("T")

CONNECT_TIMEOUT_S = 10
"""How long connecting waits for a server that does not answer (unless the URL says)."""
PORT = re.compile(r"\d+(,\d+)*")
BAD_OPTION = re.compile(r"invalid .*value")
"""libpq's words for an option value it refuses before connecting (a port that is no number,
an unknown sslmode): the URL is wrong, not the server."""
UNKNOWN_HOST = re.compile(r"failed to resolve host|could not translate host name")
"""libpq's words for a host name that names no machine: a mistyped URL (bad input, exit 2),
not a server that is down (exit 3)."""


class StoreUnavailable(Exception):
    """The database server could not be reached or refused the connection: the
    infrastructure failed (exit 3), the input may be right."""


def lock_key(name: str) -> int:
    """The advisory-lock key (a signed 64-bit integer) that stands for a name."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


@lru_cache(maxsize=512)
def pyformat(sql: str) -> str:
    """The store's SQL with psycopg's `%s` parameters for `?` (a literal `%` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


def connect(location: StoreLocation) -> psycopg.Connection[Any]:
    """A connection in autocommit mode whose rows are read by column name. A URL that is not
    one is bad input; a server that cannot be reached, `StoreUnavailable`; either way one line,
    the password masked."""
    where = Location(str(location))
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict
        from psycopg.rows import dict_row
    except ImportError:
        message = "a PostgreSQL store needs psycopg: pip install 'harness[postgres]'"
        raise SpecError.at(where, "", message) from None
    try:
        params: dict[str, Any] = conninfo_to_dict(location.target)  # libpq's options
    except psycopg.ProgrammingError as exc:
        reason = _reason(exc, *url_passwords(location.target))
        raise SpecError.at(where, "", f"not a PostgreSQL URL: {reason}") from None
    port = str(params.get("port") or 5432)
    if not PORT.fullmatch(port):  # psycopg would look the host up first, and say that failed
        raise SpecError.at(where, "", f"not a PostgreSQL URL: port {port!r} is not a number")
    if not all(0 < int(number) < 65536 for number in port.split(",")):
        raise SpecError.at(where, "", f"not a PostgreSQL URL: port {port!r} is out of range")
    params.setdefault("connect_timeout", CONNECT_TIMEOUT_S)
    params.setdefault("application_name", "harness")
    try:
        return psycopg.connect(**params, autocommit=True, row_factory=dict_row)
    except psycopg.Error as exc:
        reason = _reason(exc, str(params.get("password") or ""), *url_passwords(location.target))
        if BAD_OPTION.search(reason) or UNKNOWN_HOST.search(reason):
            raise SpecError.at(where, "", f"not a PostgreSQL URL: {reason}") from None
        message = f"{location}: cannot connect to the results store: {reason}"
        raise StoreUnavailable(message) from None


class PostgresDatabase:
    """A results database on a PostgreSQL server (`harness.store.database.Database`)."""

    dialect = "postgresql"

    def __init__(self, location: StoreLocation):
        self.location = location
        self.where = Location(str(location))
        self.connection = connect(location)
        try:
            if self._version() != SCHEMA_VERSION:
                self.write(lambda _: self._upgrade())
        except BaseException:
            self.connection.close()
            raise

    def execute(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        return self.connection.execute(pyformat(sql), tuple(params))

    def write(self, work: Callable[[Database], T]) -> T:
        """One transaction, retried whole on a deadlock or a serialization failure (another
        transaction won; doing it again sees what that one wrote)."""
        from psycopg import errors

        end, pause = time.monotonic() + WRITE_DEADLINE_S, 0.01
        while True:
            try:
                with self.connection.transaction():
                    return work(self)
            except (errors.SerializationFailure, errors.DeadlockDetected):
                if time.monotonic() > end:
                    raise
            time.sleep(pause * (1 + random.random()))
            pause = min(pause * 2, 0.5)

    def lock(self, key: str) -> None:
        self.execute("SELECT pg_advisory_xact_lock(?)", (lock_key(key),))

    @contextmanager
    def pipeline_lock(self, pipeline_id: str) -> Iterator[None]:
        holder = connect(self.location)  # a session of its own, held until it closes
        try:
            row = holder.execute(
                "SELECT pg_try_advisory_lock(%s) AS held", (lock_key(f"pipeline {pipeline_id}"),)
            ).fetchone()
            if not row or not row["held"]:
                raise SpecError.at(
                    self.where,
                    "",
                    f"pipeline {pipeline_id} is running in another process; wait for it to end "
                    "(or stop it) before resuming it",
                )
            yield
        finally:
            holder.close()  # releases the lock

    @contextmanager
    def work_lock(self, name: str) -> Iterator[None]:
        holder = connect(self.location)  # a session of its own, held until it closes
        try:
            holder.execute("SELECT pg_advisory_lock(%s)", (lock_key(f"work {name}"),))
            yield
        finally:
            holder.close()  # releases the lock

    def close(self) -> None:
        self.connection.close()

    def _version(self) -> int:
        """The schema version of the database's results tables; 0 when it has none."""
        row = self.execute("SELECT to_regclass('harness_schema') IS NOT NULL AS known").fetchone()
        if not row or not row["known"]:
            return 0
        row = self.execute("SELECT MAX(version) AS version FROM harness_schema").fetchone()
        return int(row["version"]) if row and row["version"] is not None else 0

    def _upgrade(self) -> None:
        """Create or upgrade the tables, once however many processes open a new database at
        once (they wait for one another's lock). Tables of another application in the same
        database are left alone; tables named like ours but not made by a harness are refused
        (use a schema of its own: `?options=-csearch_path%3Dharness`)."""
        self.lock("harness schema")
        self.connection.execute("CREATE TABLE IF NOT EXISTS harness_schema (version INTEGER)")
        version = self._version()
        if version == SCHEMA_VERSION:
            return
        if version == 0:
            rows = self.execute(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = current_schema()"
            )
            clashing = sorted({row["table_name"] for row in rows} & TABLES)
            if clashing:
                raise SpecError.at(
                    self.where,
                    "",
                    f"not a results store: it holds tables of another kind ({', '.join(clashing)})",
                )
        upgrade(self.connection.execute, self.dialect, version, self.where)
        self.connection.execute("DELETE FROM harness_schema")
        self.execute("INSERT INTO harness_schema (version) VALUES (?)", (SCHEMA_VERSION,))


def _reason(exc: BaseException, *passwords: str) -> str:
    """The first line of a driver error, with the passwords (and any piece of one it quotes:
    `"pw SECRET9"` of a password with a space) and every secret masked."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    pieces = {piece for p in passwords if p for piece in (p, *re.split(r"[\s#?/@:]+", p))}
    for piece in sorted((p for p in pieces if len(p) >= 3), key=len, reverse=True):
        text = text.replace(piece, MASK)
    return redact(text)

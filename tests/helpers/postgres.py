"""A throwaway PostgreSQL cluster for the tests: `initdb` in a temporary folder, a server that
listens on a Unix socket in that folder only (no TCP port to clash with anything), a fresh
database per test, and the cluster stopped and removed at the end.

PostgreSQL refuses to run as root: as root, the cluster belongs to the `postgres` user (Debian's
`postgresql` package creates it, and `.ci/run` installs the package)."""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SUPERUSER = "harness"


def server_bin() -> Path | None:
    """The folder of the newest installed `initdb` and `pg_ctl`, if any."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=_version)
    on_path = shutil.which("pg_ctl")
    if found:
        return Path(found[-1]).parent
    return Path(on_path).parent if on_path and shutil.which("initdb") else None


def _version(path: str) -> int:
    part = Path(path).parts[-3]
    return int(part) if part.isdigit() else 0


def _as_owner(command: list[str], owner: str | None) -> list[str]:
    return ["runuser", "-u", owner, "--", *command] if owner else command


class Cluster:
    """A running server; `database()` makes an empty database and returns its URL."""

    def __init__(self, folder: Path, owner: str | None):
        self.folder, self.owner = folder, owner

    def url(self, database: str = "postgres", password: str = "") -> str:
        secret = f":{password}" if password else ""
        return f"postgresql://{SUPERUSER}{secret}@/{database}?host={self.folder}"

    def database(self) -> str:
        """A new empty database's URL (each test its own)."""
        import psycopg

        name = "t_" + secrets.token_hex(6)
        with psycopg.connect(self.url(), autocommit=True) as db:
            db.execute(f"CREATE DATABASE {name}")
        return self.url(name)


@contextmanager
def cluster() -> Iterator[Cluster]:
    """Start a cluster for the block, then stop it and delete its folder."""
    binaries = server_bin()
    if binaries is None:
        raise FileNotFoundError("no PostgreSQL server binaries (initdb, pg_ctl)")
    owner = "postgres" if os.geteuid() == 0 else None
    folder = Path(tempfile.mkdtemp(prefix="harness-pg-"))
    data = folder / "data"
    if owner:
        entry = pwd.getpwnam(owner)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
    quiet = {"check": True, "capture_output": True, "text": True}
    try:
        initdb = [str(binaries / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust"]
        # A language's collation (ICU's English), not C: the store must sort as SQLite does
        # whatever the database's locale.
        icu = ["--locale-provider=icu", "--icu-locale=en", "--locale=C.UTF-8"]
        made = subprocess.run(_as_owner([*initdb, "--no-sync", *icu], owner), capture_output=True)
        if made.returncode != 0:  # a server built without ICU
            shutil.rmtree(data, ignore_errors=True)
            subprocess.run(_as_owner([*initdb, "--no-sync"], owner), **quiet)
        options = f"-k {folder} -c listen_addresses='' -c fsync=off"
        start = [str(binaries / "pg_ctl"), "-D", str(data), "-o", options, "-w", "start"]
        subprocess.run(_as_owner([*start, "-l", str(folder / "log")], owner), **quiet)
        try:
            yield Cluster(folder, owner)
        finally:
            stop = [str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]
            subprocess.run(_as_owner(stop, owner), capture_output=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def serving() -> Iterator[Cluster]:
    """A cluster for the length of a fixture (`pytest.fixture(scope=...)(serving)`); the test
    is skipped where psycopg or the server binaries are missing."""
    import pytest

    pytest.importorskip("psycopg", reason="the postgres extra: pip install -e '.[postgres]'")
    if server_bin() is None:
        pytest.skip("no PostgreSQL server (initdb, pg_ctl): apt-get install postgresql")
    with cluster() as running:
        yield running

"""Where the results store lives: a SQLite file (the default, a path or `sqlite:///PATH`), or a
PostgreSQL database named by a `postgresql://` URL, so that runners on several machines share
one history. Any other URL, a `file:` URI or an in-memory database is refused: taken as a path,
`mysql://u:pw@h/db` would create a folder `mysql:` and print the password, and a store in
memory would lose every result when the command ends.

Kept apart from `harness.store` and light, so that the command line can parse
`--store` and `$HARNESS_STORE` without loading the store or a database driver.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from harness.secrets import mask_url_passwords

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
SQLITE_SCHEME = "sqlite:///"
URL_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*)://")
IN_MEMORY = ":memory:"
ENV_VAR = "HARNESS_STORE"
"""The environment variable that names the store when `--store` is not given."""


@dataclass(frozen=True)
class StoreLocation:
    """A results store: a file path, or a PostgreSQL URL. Printed, the URL's password is
    masked, so that a location may go into any message or log."""

    target: str

    @classmethod
    def of(cls, value: StoreTarget) -> StoreLocation:
        """A location from what a caller holds: a location, a path, or the text of `--store`
        (checked by `parse`: a path object is always a file)."""
        if isinstance(value, StoreLocation):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        return cls(os.fspath(value))

    @classmethod
    def parse(cls, text: str) -> StoreLocation:
        """The location `--store` or `$HARNESS_STORE` names. Anything that is neither a file nor
        a PostgreSQL database is `BadStoreTarget`, whose message names the scheme only, never
        the rest of the URL (which may hold a password)."""
        if text.lower().startswith(POSTGRES_SCHEMES):
            return cls(text)
        path = text[len(SQLITE_SCHEME) :] if text.lower().startswith(SQLITE_SCHEME) else text
        scheme = URL_SCHEME.match(path)
        if scheme:
            raise BadStoreTarget(
                f"{scheme.group(1)}:// is not a results store: give a file path, "
                "sqlite:///PATH or postgresql://USER@HOST/DB"
            )
        if path.lower().startswith("file:"):
            raise BadStoreTarget("a file: URI is not a results store: give the file's path")
        if path.strip() in ("", IN_MEMORY):
            what = "an in-memory database" if path.strip() else "an empty path"
            raise BadStoreTarget(f"{what} is not a results store: results would be lost")
        return cls(path)

    @property
    def is_postgres(self) -> bool:
        return self.target.lower().startswith(POSTGRES_SCHEMES)

    @property
    def path(self) -> Path:
        """The SQLite file (only for a location that is not a URL)."""
        if self.is_postgres:
            raise ValueError(f"{self} is a database URL, not a file")
        return Path(self.target)

    def exists(self) -> bool:
        """Whether there may be results to read: the file exists; a database always may (the
        server says, once connected)."""
        return self.is_postgres or self.path.is_file()

    def __str__(self) -> str:
        return mask_url_passwords(self.target) if self.is_postgres else self.target

    def __repr__(self) -> str:  # a traceback or a log shows the masked URL too
        return f"StoreLocation({str(self)!r})"


class BadStoreTarget(ValueError):
    """`--store` names something that is not a results store (bad input, exit 2)."""


StoreTarget = StoreLocation | str | os.PathLike[str]
"""What a caller may name a store by: a location, a path, or the text of `--store`."""

"""Where the results store lives: a SQLite file (the default), or a PostgreSQL database named
by a `postgresql://` URL, so that runners on several machines share one history.

Kept apart from `harness.store` and light, so that the command line can parse
`--store` and `$HARNESS_STORE` without loading the store or a database driver.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from harness.secrets import mask_url_passwords

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
ENV_VAR = "HARNESS_STORE"
"""The environment variable that names the store when `--store` is not given."""


@dataclass(frozen=True)
class StoreLocation:
    """A results store: a file path, or a PostgreSQL URL. Printed, the URL's password is
    masked, so that a location may go into any message or log."""

    target: str

    @classmethod
    def of(cls, value: StoreTarget) -> StoreLocation:
        """A location from what a caller holds: a location, a path, or the text of `--store`."""
        if isinstance(value, StoreLocation):
            return value
        return cls(os.fspath(value))

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


StoreTarget = StoreLocation | str | os.PathLike[str]
"""What a caller may name a store by: a location, a path, or the text of `--store`."""

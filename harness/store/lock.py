"""One process per pipeline execution: a lock held while it runs and released by the kernel
when the process ends, `kill -9` included. A `--resume` of a pipeline that is still running is
refused; of one whose process died, it goes ahead."""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.specs.located import Location, SpecError


def lock_file(store: Path) -> Path:
    """The file beside the results store whose byte ranges stand for pipelines."""
    return store.with_name(store.name + ".lock")


@contextmanager
def pipeline_lock(store: Path, pipeline_id: str) -> Iterator[None]:
    """Hold the pipeline's lock for the block; another process holding it is an error.

    One byte of `lock_file(store)` per pipeline (at an offset hashed from its id), locked with
    POSIX record locks: no file per pipeline to clean up, and nothing left behind by a crash.
    """
    path = lock_file(store)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        message = f"cannot open the lock file {path}: {exc.strerror}"
        raise SpecError.at(Location(str(store)), "", message) from None
    offset = int.from_bytes(hashlib.sha256(pipeline_id.encode()).digest()[:6], "big")
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
    except OSError:
        os.close(fd)
        raise SpecError.at(
            Location(str(store)),
            "",
            f"pipeline {pipeline_id} is running in another process; wait for it to end "
            "(or stop it) before resuming it",
        ) from None
    try:
        yield
    finally:
        os.close(fd)  # releases the lock

"""Locks held by a process and released by the kernel when it ends, `kill -9` included.

One process per pipeline execution: a `--resume` of a pipeline that is still running is
refused; of one whose process died, it goes ahead. One process plays a run at a time: another
process that claims the same run (an identical pipeline started at the same time) waits, then
finds the episodes stored and plays only what is missing, so no episode is played twice."""

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
    fd = _open(store)
    offset = _offset(pipeline_id)
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


@contextmanager
def work_lock(store: Path, name: str) -> Iterator[None]:
    """Hold the lock of a piece of work (`name`) for the block, waiting while another process
    holds it."""
    fd = _open(store)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX, 1, _offset(f"work {name}"))
        yield
    finally:
        os.close(fd)  # releases the lock


def _open(store: Path) -> int:
    """A descriptor of the store's lock file, created when missing."""
    path = lock_file(store)
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        message = f"cannot open the lock file {path}: {exc.strerror}"
        raise SpecError.at(Location(str(store)), "", message) from None


def _offset(name: str) -> int:
    """The byte of the lock file that stands for a name."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:6], "big")

"""Content digests that identify work: a file's or folder's bytes, the source of a class (a
domain's tools are its code), canonical JSON. A node's cache key, a task's content hash and a
run's identity are built from them."""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
from pathlib import Path
from typing import Any


def file_digest(path: str | Path) -> str:
    """SHA-256 of a file's bytes (or of a folder's files, sorted), for node identities."""
    path = Path(path)
    if not path.is_dir():
        stat = path.stat()
        return _one_file_digest(str(path), stat.st_mtime_ns, stat.st_size)
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(path)).encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


@functools.lru_cache(maxsize=4096)
def _one_file_digest(path: str, mtime_ns: int, size: int) -> str:
    """A file's digest, read once while it is unchanged (every task of a suite names the same
    domain source and checker files)."""
    digest = hashlib.sha256(Path(path).name.encode())
    digest.update(Path(path).read_bytes())
    return digest.hexdigest()


def source_digest(obj: Any) -> str:
    """SHA-256 of the source file that defines a class or function (a domain: its tools are its
    code), for node identities; '' when there is none (built in, or made at run time)."""
    try:
        path = inspect.getsourcefile(obj)
    except TypeError:
        return ""
    return file_digest(path) if path is not None and Path(path).is_file() else ""


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)

"""What says that files are unchanged: the stamp `built_once` compares, so that a suite, its
personas and its start states are built once per command while their files stay the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def files_stamp(files: list[Path]) -> tuple[Any, ...]:
    """The name, modification time and size of each file: what says they are unchanged."""
    stats = [(str(f), f.stat()) for f in files]
    return tuple((name, stat.st_mtime_ns, stat.st_size) for name, stat in stats)

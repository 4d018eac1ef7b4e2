"""Named extension points: model providers, check kinds, domains (and later, node kinds).

A module registers what it adds with a decorator; lookups import the bundled modules on first
use, so nothing heavy is imported before it is needed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Entries by name, with the bundled modules that register themselves into it."""

    def __init__(self, what: str, builtins: tuple[str, ...] = ()):
        self.what = what
        self._builtins = builtins
        self._entries: dict[str, T] = {}
        self._loaded = False

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: make `entry` available as `name`."""

        def decorator(entry: T) -> T:
            self._entries[name] = entry
            return entry

        return decorator

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            for module in self._builtins:
                importlib.import_module(module)

    def get(self, name: str) -> T | None:
        self._load()
        return self._entries.get(name)

    def names(self) -> list[str]:
        self._load()
        return sorted(self._entries)

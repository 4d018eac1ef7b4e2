"""Named extension points: model providers, check kinds, domains, node kinds.

A module registers what it adds with a decorator. Lookups first import the bundled modules, then
the installed plug-ins of the registry's entry-point group (e.g. `harness.domains`), then the
project file's `plugins:`, so nothing is imported before it is needed. A name is taken once.
"""

from __future__ import annotations

import functools
import importlib
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    import sys
    from importlib.metadata import EntryPoints

    if sys.version_info >= (3, 12):
        AllEntryPoints = EntryPoints
    else:  # every entry point comes as `SelectableGroups`; both have `select`
        from importlib.metadata import SelectableGroups

        AllEntryPoints = EntryPoints | SelectableGroups

T = TypeVar("T")


class DuplicateEntry(ValueError):
    """A second, different entry under a name that is already taken."""


@functools.cache
def _entry_points() -> AllEntryPoints:
    """Every installed entry point, read once per process: each `entry_points(group=...)` reads
    the metadata of every installed distribution again, and there is one registry per kind."""
    from importlib.metadata import entry_points

    return entry_points()


def source_of(entry: object) -> str:
    """Where an entry was defined, for messages: `package.module:Name`."""
    module = getattr(entry, "__module__", None) or type(entry).__module__
    name = getattr(entry, "__qualname__", None) or type(entry).__qualname__
    return f"{module}:{name}"


class Registry(Generic[T]):
    """Entries by name, with the bundled modules and the entry-point group that fill it."""

    def __init__(self, what: str, builtins: tuple[str, ...] = (), group: str | None = None):
        self.what = what
        self.group = group
        self._builtins = builtins
        self._entries: dict[str, T] = {}
        self._loaded = False

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: make `entry` available as `name`. Registering the same definition again
        (its module imported twice) is a no-op; a different one is refused."""

        def decorator(entry: T) -> T:
            present = self._entries.get(name)
            if present is not None and source_of(present) != source_of(entry):
                raise DuplicateEntry(
                    f"{self.what} '{name}' is registered twice: by {source_of(present)} "
                    f"and by {source_of(entry)}"
                )
            self._entries[name] = entry
            return entry

        return decorator

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for module in self._builtins:
            importlib.import_module(module)
        if self.group is not None:
            for point in _entry_points().select(group=self.group):
                loaded = point.load()
                if not isinstance(loaded, types.ModuleType):  # a module registers itself
                    self.register(point.name)(loaded)
        from harness.project import load_plugins

        load_plugins()

    def get(self, name: str) -> T | None:
        self._load()
        return self._entries.get(name)

    def names(self) -> list[str]:
        self._load()
        return sorted(self._entries)

    def items(self) -> list[tuple[str, T]]:
        self._load()
        return sorted(self._entries.items())

    def unknown(self, name: str, *ways: str) -> str:
        """The message for a name nobody registered: what is known, and how to add one (the
        `ways` a caller knows of, then a project plug-in and the entry-point group)."""
        known = ", ".join(self.names()) or "none"
        ways += ("a 'plugins:' module in harness.yaml",)
        if self.group:
            ways += (f"a '{self.group}' entry point",)
        return f"unknown {self.what} '{name}'; known: {known} (add one: {', '.join(ways)})"

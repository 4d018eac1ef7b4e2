"""Deprecated: `harness.traces` is now `harness.production` (production sessions read back into
regression tasks), renamed so that it is not confused with `harness.tracing` (Weave).

Importing it warns once and hands out the new modules themselves: `harness.traces.calls` is
`harness.production.calls` (the same module object, so patches and `isinstance` agree), and any
submodule imports under the old name. The old name goes in the next release."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

import harness.production

OLD = __name__
NEW = "harness.production"


warnings.warn(
    "harness.traces is now harness.production; the old name goes in the next release",
    DeprecationWarning,
    stacklevel=2,  # the importer's line: warnings skips the import machinery's frames
)


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `harness.traces.X` and loads it as `harness.production.X`: the import system then
    keeps, under the old name, the module that the new name imported."""

    alias_of = NEW  # marks the finder, so that a re-imported shim does not add a second one

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(OLD + "."):
            return None
        if importlib.util.find_spec(NEW + fullname[len(OLD) :]) is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # a placeholder that exec_module replaces in sys.modules

    def exec_module(self, module: ModuleType) -> None:
        name = module.__name__
        sys.modules[name] = importlib.import_module(NEW + name[len(OLD) :])


if not any(getattr(finder, "alias_of", None) == NEW for finder in sys.meta_path):
    sys.meta_path.insert(0, _Alias())

__path__ = []  # a package, so that submodule imports reach the finder above


def __getattr__(name: str) -> object:
    return getattr(harness.production, name)

"""harness: a self-improving evaluation harness for LLM agents.

The library API (`harness.api`) is importable from here: `harness.load_suite`,
`harness.load_agent`, `harness.evaluate`, `harness.compare`, `harness.gate` and their result
types. They load on first use, so that `import harness` (and the command line) stays fast.
`harness.compare` and `harness.gate` are functions; the modules of the same names are reached
with `from harness.compare import ...`.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "Episode",
    "RunResult",
    "Suite",
    "__version__",
    "compare",
    "evaluate",
    "evaluate_async",
    "gate",
    "load_agent",
    "load_suite",
]
_API = frozenset(__all__) - {"__version__"}

if TYPE_CHECKING:
    # `evaluate` and `gate` are the functions, not the modules of those names: see `_Package`.
    from harness.api import (  # type: ignore[no-redef]
        Agent,
        Episode,
        RunResult,
        Suite,
        compare,
        evaluate,
        evaluate_async,
        gate,
        load_agent,
        load_suite,
    )


class _Package(types.ModuleType):
    """`harness.compare` and `harness.gate` are the API's functions, though modules of those
    names exist (`from harness.compare import ...` still imports them): importing one must not
    rebind the package's attribute to it."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _API and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(importlib.import_module("harness.api"), name)
    raise AttributeError(f"module 'harness' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)

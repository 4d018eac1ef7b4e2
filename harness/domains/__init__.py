"""Bundled example domains with real state and tools, and the registry they join."""

from harness.domains.base import (
    DOMAINS,
    Environment,
    ToolBroken,
    ToolCrashed,
    ToolError,
    ToolOutcome,
    ToolTimeout,
    ToolUnavailable,
    UnknownDomain,
    get_domain,
    register_domain,
    resolve_domain,
    tool,
)
from harness.domains.trace_replay import TraceReplay

__all__ = [
    "DOMAINS",
    "Environment",
    "ToolBroken",
    "ToolCrashed",
    "ToolError",
    "ToolOutcome",
    "ToolTimeout",
    "ToolUnavailable",
    "TraceReplay",
    "UnknownDomain",
    "get_domain",
    "register_domain",
    "resolve_domain",
    "tool",
]

"""What a group of calls shows of tools and failures: the tool ops (by `kind="tool"`, or named
after a tool the model calls offered), the spec of a tool that was never offered (its parameters
inferred from its calls), and where each exception started (not where it propagated to)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.outcomes import DEFAULT, ErrorValues
from harness.production import llm_calls
from harness.production.calls import CallRecord
from harness.transcript import ToolSpec

Report = Callable[[CallRecord, str], None]
"""Where a part of a group that cannot be used goes: the call, and why."""


@dataclass
class Observation:
    """A tool call seen in production: what was asked and what came back."""

    name: str
    arguments: dict[str, Any]
    result: Any = None
    error: str | None = None  # `Type: message` when the tool raised
    call_id: str | None = None  # the tool op's call, when the tool was traced
    failed: str | None = None  # the failure its result states (an error value, not raised)

    @property
    def failure(self) -> str | None:
        """What went wrong with the call: what it raised, or the error value it returned."""
        return self.error or self.failed


@dataclass
class Raised:
    """An exception (or an `error` status), at the call where it started."""

    op: str  # the op's short name
    type: str
    message: str
    call_id: str
    trace_id: str
    started_at: str
    tool: str | None = None  # the tool, when the call was a tool's
    arguments: dict[str, Any] = field(default_factory=dict)  # the tool's arguments

    def __str__(self) -> str:
        where = f" in tool {self.tool}" if self.tool else ""
        return f"exception {self.type}: {self.message}{where}"


def raised(calls: list[CallRecord], tools: set[str]) -> list[Raised]:
    """Where each failure started: an erroring call none of whose children raised the same
    error (an exception propagates up to the root; its origin is what matters)."""
    # keyed by call id; `get` of a root's parent id (None) finds nothing
    errors: dict[str | None, tuple[str, str]] = {
        c.id: error for c in calls if (error := c.error()) is not None
    }
    if not errors:
        return []
    propagated = {  # parents that raised what a child raised
        c.parent_id for c in calls if errors.get(c.id) and errors[c.id] == errors.get(c.parent_id)
    }
    origins = []
    for call in calls:
        error = errors.get(call.id)
        if error is None or call.id in propagated:
            continue
        tool = tool_name(call) if is_tool_op(call, tools) else None
        arguments = arguments_of(call) if tool else {}
        origins.append(
            Raised(call.op, *error, call.id, call.trace_id, call.started_at, tool, arguments)
        )
    return origins


def tool_name(call: CallRecord) -> str:
    return call.op.split(".")[-1]


def is_tool_op(call: CallRecord, tools: set[str]) -> bool:
    return not llm_calls.is_llm(call) and (call.kind == "tool" or tool_name(call) in tools)


def arguments_of(call: CallRecord) -> dict[str, Any]:
    return {k: v for k, v in call.inputs.items() if k != "self"}


def tool_observations(
    tool_ops: list[CallRecord],
    offered: dict[str, ToolSpec],
    report: Report,
    error_values: ErrorValues = DEFAULT,
) -> list[Observation]:
    """What the tool ops were asked and gave; an op whose inputs are not the offered tool's
    parameters, or whose output is an unresolved object reference, is reported and left out."""
    observed = []
    for call in tool_ops:
        name, arguments = tool_name(call), arguments_of(call)
        spec = offered.get(name)
        known = set((spec.parameters.get("properties") or {}) if spec else arguments)
        if set(arguments) - known:
            unknown = ", ".join(sorted(set(arguments) - known))
            report(
                call,
                f"tool op {name}: inputs ({unknown}) are not parameters of the offered tool "
                f"({', '.join(sorted(known)) or 'none'}); not replayed",
            )
            continue
        if isinstance(call.output, str) and call.output.startswith("weave:///"):
            report(call, f"tool op {name}: output is an unresolved object reference; not replayed")
            continue
        error = call.error()
        observed.append(
            Observation(
                name,
                arguments,
                None if error else call.output,
                f"{error[0]}: {error[1]}" if error else None,
                call.id,
                None if error else error_values.of(call.output),
            )
        )
    return observed


_JSON_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number", list: "array"}


def inferred_tools(observations: list[Observation], offered: list[ToolSpec]) -> list[ToolSpec]:
    """The offered tools, plus a spec for each observed tool that was not offered (its
    parameters inferred from the arguments it was called with)."""
    tools = {t.name: t for t in offered}
    seen: dict[str, list[dict[str, Any]]] = {}
    for observation in observations:
        if observation.name not in tools:
            seen.setdefault(observation.name, []).append(observation.arguments)
    for name, calls in seen.items():
        properties: dict[str, dict[str, Any]] = {}
        for arguments in calls:
            for key, value in arguments.items():
                kind = "object" if isinstance(value, dict) else _JSON_TYPES.get(type(value))
                known = properties.setdefault(key, {"type": kind} if kind else {})
                if known.get("type") not in (None, kind):
                    numbers = {known["type"], kind} <= {"integer", "number"}
                    properties[key] = {"type": "number"} if numbers else {}
        required = sorted(set.intersection(*(set(a) for a in calls))) if calls else []
        parameters = {"type": "object", "properties": properties, "required": required}
        tools[name] = ToolSpec(name=name, description="", parameters=parameters)
    return list(tools.values())

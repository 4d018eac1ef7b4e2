"""Environments: state plus the tools an agent may call on it. Domains register themselves."""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from harness.registry import Registry
from harness.tracing import child_span
from harness.transcript import ToolSpec


class ToolError(Exception):
    """A tool refusing a request (bad id, policy); the agent sees the message as the result."""


class ToolTimeout(Exception):
    """A tool that never returned: the episode ends as an error of the tool side."""


@dataclass(frozen=True)
class ToolOutcome:
    """A tool's result as the agent will see it."""

    content: str
    is_error: bool = False


def tool(method: Callable[..., Any]) -> Callable[..., Any]:
    """Mark an environment method as a tool. Its type hints become the JSON-schema parameters
    and its docstring the description."""
    method.__is_tool__ = True  # type: ignore[attr-defined]
    return method


class _Tool:
    """A bound description of one tool: spec for the model, argument model for validation."""

    def __init__(self, name: str, method: Callable[..., Any]):
        self.name = name
        self.is_async = inspect.iscoroutinefunction(method)
        hints = typing.get_type_hints(method)
        fields: dict[str, Any] = {}
        for param in list(inspect.signature(method).parameters.values())[1:]:
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (hints.get(param.name, Any), default)
        self.arguments = create_model(
            f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
        )
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        description = inspect.getdoc(method) or ""
        self.spec = ToolSpec(name=name, description=description, parameters=schema)


class Environment:
    """A domain's state and tools. Subclasses add `@tool` methods and may give a `State` model
    that validates a task's start state."""

    domain: ClassVar[str] = ""
    description: ClassVar[str] = ""
    """What the domain is, in a sentence: given to the simulated user and the judge."""
    policy: ClassVar[str] = ""
    """The rules an agent of this domain must follow: given to the judge."""
    id_patterns: ClassVar[dict[str, str]] = {}
    """The domain's kinds of ids, as name -> regex (e.g. `{"ticket_id": "T-[0-9]+"}`): tasks
    made from production conversations name each id a user mentions by its kind. When none are
    declared, any `AB-123`-like id is an `id`."""
    tool_timeout_s: ClassVar[float] = 30.0
    State: ClassVar[type[BaseModel] | None] = None
    _tools: ClassVar[dict[str, _Tool]]

    def __init__(self, state: dict[str, Any]):
        self.state: dict[str, Any] = copy.deepcopy(state)
        self.done = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._tools = {
            name: _Tool(name, member)
            for name, member in inspect.getmembers(cls, inspect.isfunction)
            if getattr(member, "__is_tool__", False)
        }

    @classmethod
    def tool_specs(cls, names: list[str] | None = None) -> list[ToolSpec]:
        """Specs of the named tools (all tools when no names are given), in the order asked."""
        names = list(cls._tools) if names is None else names
        return [cls._tools[name].spec for name in names]

    @classmethod
    def tool_names(cls) -> list[str]:
        return list(cls._tools)

    @classmethod
    def observed_state(cls, calls: list[tuple[str, dict[str, Any], Any]]) -> dict[str, Any]:
        """The part of a start state that tool results seen in production reveal, as a patch
        over a state snapshot; `calls` are (tool, arguments, result) in order. None known."""
        return {}

    @classmethod
    def expected_state(cls, calls: list[tuple[str, dict[str, Any], Any]]) -> dict[str, Any]:
        """The final state that production's successful tool calls imply (for a state check)."""
        return {}

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Run a tool. Bad arguments, refusals and a tool that raises come back to the agent as
        error results; only an async tool that outlives `tool_timeout_s` raises
        (`ToolTimeout`), as the environment can no longer be trusted."""
        with child_span("harness.tool_call", {"name": name, "arguments": arguments}) as span:
            outcome = await self._call(name, arguments)
            span.output = {"content": outcome.content, "is_error": outcome.is_error}
        return outcome

    async def _call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        timeout_s = self.tool_timeout_s
        described = self._tools.get(name)
        if described is None:
            return ToolOutcome(f"Error: unknown tool '{name}'", is_error=True)
        try:
            parsed = described.arguments.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
            )
            return ToolOutcome(f"Error: invalid arguments for {name}: {problems}", is_error=True)
        method = getattr(self, name)
        try:
            if described.is_async:
                async with asyncio.timeout(timeout_s):
                    result = await method(**parsed.model_dump())
            else:
                result = method(**parsed.model_dump())
        except ToolError as exc:
            return ToolOutcome(f"Error: {exc}", is_error=True)
        except TimeoutError:
            raise ToolTimeout(f"tool {name} gave no result within {timeout_s:g}s") from None
        except Exception as exc:
            return ToolOutcome(f"Error: {name} failed: {type(exc).__name__}: {exc}", is_error=True)
        return ToolOutcome(json.dumps(result, sort_keys=True))


E = TypeVar("E", bound=type[Environment])
DOMAINS: Registry[type[Environment]] = Registry(
    "domain", ("harness.domains.support",), group="harness.domains"
)


def register_domain(cls: E) -> E:
    """Class decorator: make a domain available to tasks by its `domain` name."""
    return DOMAINS.register(cls.domain)(cls)


class UnknownDomain(LookupError):
    """A task's `domain:` that names no registered domain, module or file."""


def resolve_domain(reference: str, base: Path | None = None) -> type[Environment]:
    """The environment class a task's `domain:` names: a registered name, an importable
    `package.module:Class`, or a `path/to/file.py:Class` relative to `base` (the task's folder)."""
    from harness.imports import UnresolvedReference, is_reference, load_reference

    if not is_reference(reference):
        found = DOMAINS.get(reference)
        if found is None:
            raise UnknownDomain(
                DOMAINS.unknown(reference, "'path/to/file.py:Class'", "'package.module:Class'")
            )
        return found
    try:
        found = load_reference(reference, base)
    except UnresolvedReference as exc:
        raise UnknownDomain(f"domain '{reference}': {exc}") from None
    if not (isinstance(found, type) and issubclass(found, Environment)):
        raise UnknownDomain(f"domain '{reference}' is not an Environment subclass")
    return found


def get_domain(name: str) -> type[Environment] | None:
    """The environment class of a domain (bundled domains load on first use)."""
    return DOMAINS.get(name)

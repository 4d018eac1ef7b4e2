"""Environments: state plus the tools an agent may call on it. Domains register themselves."""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from harness.registry import Registry
from harness.specs.located import copy_data
from harness.tracing import child_span
from harness.transcript import ToolSpec


class ToolError(Exception):
    """A tool refusing a request (bad id, policy); the agent sees the message as the result."""


class ToolUnavailable(Exception):
    """A tool's infrastructure failing: its back end is down, a connection was refused, the
    sandbox it runs code in failed. Raise it from a tool (sync or async) when the request could
    not be served at all, as opposed to `ToolError`, a refusal the agent sees and may act on.
    It ends the episode as an `error` of the tool side under every agent runner (llm, python,
    http), never as a failure of the agent, with the message as the episode's error: say what
    failed. Any other exception a tool raises is a bug of the tool, shown to the agent as the
    result (`Error: <tool> failed: ...`)."""


class ToolTimeout(ToolUnavailable):
    """An async tool that gave no result within its domain's `tool_timeout_s` (a class
    attribute, 30 seconds unless the domain says otherwise; a sync tool is not interrupted).
    A `ToolUnavailable`: the episode ends as an error of the tool side."""


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


class _BadArguments(ValueError):
    """Arguments a tool's parameters refuse; the message lists what is wrong."""


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

    def parse(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments to call the method with; `_BadArguments` says what is wrong."""
        try:
            return self.arguments.model_validate(arguments).model_dump()
        except ValidationError as exc:
            raise _BadArguments(
                "; ".join(
                    f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}"
                    for e in exc.errors()
                )
            ) from None

    def bind(self, env: Environment) -> Callable[..., Any]:
        return getattr(env, self.name)


class _DataTool:
    """A tool described by data (name, description, JSON-schema parameters), as an app offered
    it to its model; `Environment.call_data_tool` runs it."""

    is_async = False

    def __init__(self, spec: ToolSpec):
        from jsonschema.validators import validator_for

        self.name, self.spec = spec.name, spec
        self._validator = validator_for(spec.parameters)(spec.parameters)

    def parse(self, arguments: dict[str, Any]) -> dict[str, Any]:
        errors = sorted(self._validator.iter_errors(arguments), key=lambda e: list(e.path))
        if errors:
            raise _BadArguments(
                "; ".join(
                    f"{'.'.join(map(str, e.path)) or 'arguments'}: {e.message}" for e in errors
                )
            )
        return dict(arguments)

    def bind(self, env: Environment) -> Callable[..., Any]:
        return lambda **arguments: env.call_data_tool(self.name, arguments)


class Environment:
    """A domain's state and tools. Subclasses add `@tool` methods and may give a `State` model
    that validates a task's start state.

    Hooks for tasks made from production traces (`harness traces to-tasks --domain REF`):
    `observed_state(calls)` seeds the start state from the tool results production saw, and
    `expected_state(calls)` states the final state a successful conversation implies; `calls`
    are (tool, arguments, result) of production's successful tool calls, from any app, so a
    hook should skip what it does not recognise. A domain whose tools are data rather than
    methods (the bundled `replay` domain) overrides `for_state(state)` to return
    `with_tools(specs)` and runs those tools in `call_data_tool(name, arguments)`."""

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
    _tools: ClassVar[dict[str, _Tool | _DataTool]]

    def __init__(self, state: dict[str, Any]):
        self.state: dict[str, Any] = copy_data(state)  # the caller's state is never changed
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
    def for_state(cls, state: dict[str, Any]) -> type[Environment]:
        """The class that plays a task starting from `state`: this class, unless the domain's
        tools are data of the task (the `replay` domain returns `with_tools` of the tools the
        state records). Asked before a task's checks are matched against the tools, and for
        every episode."""
        return cls

    @classmethod
    def with_tools(cls, specs: list[ToolSpec]) -> type[Environment]:
        """A subclass that also offers tools described by data (name, description, JSON-schema
        parameters, e.g. from an LLM call's `tools`), run by `call_data_tool`; a `@tool` method
        of the same name wins. The same specs give the same class."""
        key = json.dumps([s.model_dump(mode="json") for s in specs], sort_keys=True)
        return _with_tools(cls, key)

    def call_data_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """Run a tool that `with_tools` declared, with validated arguments: its JSON result, or
        `ToolError` for a refusal. A domain that declares data tools overrides this."""
        raise ToolError(f"tool '{name}' has no implementation in {type(self).__name__}")

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
        error results; only a failure of the tool's infrastructure raises: `ToolUnavailable`
        from the tool, or `ToolTimeout` for an async tool that outlives `tool_timeout_s`, as
        the environment can no longer be trusted."""
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
            parsed = described.parse(arguments)
        except _BadArguments as exc:
            return ToolOutcome(f"Error: invalid arguments for {name}: {exc}", is_error=True)
        method = described.bind(self)
        try:
            if described.is_async:
                async with asyncio.timeout(timeout_s):
                    result = await method(**parsed)
            else:
                result = method(**parsed)
        except ToolError as exc:
            return ToolOutcome(f"Error: {exc}", is_error=True)
        except TimeoutError:
            raise ToolTimeout(f"tool {name} gave no result within {timeout_s:g}s") from None
        except ToolUnavailable:
            raise
        except Exception as exc:
            return ToolOutcome(f"Error: {name} failed: {type(exc).__name__}: {exc}", is_error=True)
        return ToolOutcome(json.dumps(result, sort_keys=True))


@functools.lru_cache(maxsize=256)
def _with_tools(cls: type[Environment], specs_json: str) -> type[Environment]:
    """`Environment.with_tools`, cached by the specs' JSON text."""
    specs = [ToolSpec.model_validate(s) for s in json.loads(specs_json)]
    subclass = type(cls.__name__, (cls,), {"__module__": cls.__module__, "__doc__": cls.__doc__})
    subclass._tools = {**{s.name: _DataTool(s) for s in specs}, **subclass._tools}
    return subclass


E = TypeVar("E", bound=type[Environment])
DOMAINS: Registry[type[Environment]] = Registry(
    "domain", ("harness.domains.support", "harness.domains.replay"), group="harness.domains"
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
            from harness.project import where_looked

            ways = ("'path/to/file.py:Class'", "'package.module:Class'")
            raise UnknownDomain(f"{DOMAINS.unknown(reference, *ways)}; {where_looked()}")
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

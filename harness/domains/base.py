"""Environments: state plus the tools an agent may call on it. Domains register themselves."""

from __future__ import annotations

import asyncio
import inspect
import json
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo

from harness.domains.docstrings import parse_tool_doc
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
    failed. Any other exception a tool raises is a bug of the tool, shown to the agent as an
    error result it may act on: the exception's type and message, `Error: ValueError: bad
    date` (the type alone when the message is empty), never a traceback."""


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
    and its docstring the description. A parameter's description comes from its hint,
    `Annotated[str, Field(description="...")]` (pydantic's `Field`; a plain string,
    `Annotated[str, "..."]`, also does), else from the docstring's parameter section: Google's
    `Args:` (`name: text`, or `name (type): text`, continuation lines indented further), or
    NumPy's `Parameters` / Sphinx's `:param name:`. A docstring with such a section loses it,
    and its `Returns:` and `Raises:` sections, from the description; the summary and body stay."""
    method.__is_tool__ = True  # type: ignore[attr-defined]
    return method


def _raised(exc: BaseException) -> str:
    """An exception as an agent reads it: `ValueError: bad date`, or `ValueError` alone when it
    has no message."""
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


class _BadArguments(ValueError):
    """Arguments a tool's parameters refuse; the message lists what is wrong."""


def _described(hint: Any, default: Any, documented: str | None) -> Any:
    """A parameter's type, carrying its description: a pydantic `Field(description=...)` (in
    `Annotated` or as the default) as given, else the plain string of `Annotated[T, "text"]`,
    else the text of the docstring's parameter section."""
    metadata = typing.get_args(hint)[1:] if typing.get_origin(hint) is Annotated else ()
    fields = [m for m in (*metadata, default) if isinstance(m, FieldInfo)]
    if any(f.description is not None for f in fields):
        return hint
    texts = [m for m in metadata if isinstance(m, str)]
    text = texts[-1] if texts else documented
    return Annotated[hint, Field(description=text)] if text else hint


class DescribedTool(Protocol):
    """What a domain holds of each of its tools: a `_Tool` of a method, or a tool described by
    data (`harness.domains.trace_replay`)."""

    name: str
    spec: ToolSpec
    is_async: bool

    def parse(self, arguments: dict[str, Any]) -> dict[str, Any]: ...

    def bind(self, env: Environment) -> Callable[..., Any]: ...


class _Tool:
    """A bound description of one tool: spec for the model, argument model for validation."""

    def __init__(self, name: str, method: Callable[..., Any]):
        self.name = name
        self.is_async = inspect.iscoroutinefunction(method)
        hints = typing.get_type_hints(method, include_extras=True)
        doc = parse_tool_doc(inspect.getdoc(method) or "")
        fields: dict[str, Any] = {}
        for param in list(inspect.signature(method).parameters.values())[1:]:
            default = ... if param.default is inspect.Parameter.empty else param.default
            hint = _described(hints.get(param.name, Any), default, doc.parameters.get(param.name))
            fields[param.name] = (hint, default)
        self.arguments = create_model(
            f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
        )
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        self.spec = ToolSpec(name=name, description=doc.description, parameters=schema)

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


class Environment:
    """A domain's state and tools. Subclasses add `@tool` methods and may give a `State` model
    that validates a task's start state. A domain that also plays tasks made from production
    traces (`harness traces to-tasks --domain REF`) mixes in `TraceReplay` for its hooks."""

    domain: ClassVar[str] = ""
    description: ClassVar[str] = ""
    """What the domain is, in a sentence: given to the simulated user and the judge, and to the
    agent where its variant's prompt says `{domain.description}`."""
    policy: ClassVar[str] = ""
    """The rules an agent of this domain must follow: given to the judge, and to the agent where
    its variant's prompt says `{domain.policy}` (a python agent reads `tools.policy`)."""
    tool_timeout_s: ClassVar[float] = 30.0
    State: ClassVar[type[BaseModel] | None] = None
    # a `_Tool` per method, and tools described by data (`TraceReplay.with_tools`)
    _tools: ClassVar[dict[str, DescribedTool]]

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
        except Exception as exc:  # a bug of the tool: the agent sees what was raised
            return ToolOutcome(f"Error: {_raised(exc)}", is_error=True)
        return ToolOutcome(json.dumps(result, sort_keys=True))


E = TypeVar("E", bound=type[Environment])
DOMAINS: Registry[type[Environment]] = Registry(
    "domain", ("harness.domains.support", "harness.domains.replay"), group="harness.domains"
)


def register_domain(cls: E) -> E:
    """Class decorator: make a domain available to tasks by its `domain` name."""
    DOMAINS.register(cls.domain)(cls)
    return cls


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

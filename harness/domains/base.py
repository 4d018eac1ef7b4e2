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
from harness.domains.own_state import own_state
from harness.imports import BadDefinition, frame_text, user_frames
from harness.registry import Registry
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


class ToolBroken(ToolUnavailable):
    """A bug of a tool's code that no agent could act on or be blamed for, so like
    `ToolUnavailable` it ends the episode as an `error` of the tool side: a result that is not
    JSON (a `set`, a `datetime`, an object; the message names the tool, the type and where in
    the result), or an exception of the tool's that a python agent's code let through (the
    message names the tool and the file and line of the tool's code that raised)."""


class ToolCrashed(ToolError):
    """What a python agent's `tools.call` raises when the tool's own code raised (a bug of the
    tool, not a refusal): a `ToolError`, so agent code that handles refusals handles it too;
    `crash` locates it (`tool find_sailings crashed: ferry.py:60 in find_sailings: KeyError:
    'route'`), and if the agent's code lets it through, the episode is the tool's error
    (`ToolBroken`), not the agent's crash."""

    def __init__(self, message: str, crash: str):
        super().__init__(message)
        self.crash = crash


class ToolTimeout(ToolUnavailable):
    """An async tool that gave no result within its domain's `tool_timeout_s` (a class
    attribute, 30 seconds unless the domain says otherwise; a sync tool is not interrupted).
    A `ToolUnavailable`: the episode ends as an error of the tool side."""


@dataclass(frozen=True)
class ToolOutcome:
    """A tool's result as the agent will see it."""

    content: str
    is_error: bool = False
    # the tool's own exception, located, when a bug of its code made this error (not shown to
    # the agent, which sees only the exception's type and message)
    crash: str = ""


def tool(method: Callable[..., Any]) -> Callable[..., Any]:
    """Mark an environment method as a tool. Its type hints become the JSON-schema parameters
    and its docstring the description. A parameter's description comes from its hint,
    `Annotated[str, Field(description="...")]` (pydantic's `Field`; a plain string,
    `Annotated[str, "..."]`, also does), else from the docstring's parameter section: Google's
    `Args:` (`name: text`, or `name (type): text`, continuation lines indented further), or
    NumPy's `Parameters` / Sphinx's `:param name:`. A docstring with such a section loses it,
    and its `Returns:` and `Raises:` sections, from the description; the summary and body stay.

    Every parameter is named and has a type hint (`Any` for any JSON value): a tool with
    `*args` / `**kwargs`, a positional-only or an unhinted parameter is refused when its class
    is defined. A tool returns JSON (dicts with str keys, lists, str, numbers, bool, None);
    anything else (a set, a datetime, an object) ends the episode as an `error` of the tool
    side (`ToolBroken`), never as a failure of the agent."""
    method.__is_tool__ = True  # type: ignore[attr-defined]
    return method


def _crash(name: str, exc: BaseException) -> str:
    """A tool's exception as the harness shows it: the tool, and the innermost frame of the
    tool's own code that raised (`ferry.py:60 in find_sailings`)."""
    frames = user_frames(exc)
    where = f"{frame_text(frames[-1])}: " if frames else ""
    return f"tool {name} crashed: {where}{_raised(exc)}"


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


_VARIADIC = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}


def _check_signature(owner: str, name: str, params: list[inspect.Parameter], hints: Any) -> None:
    """Refuse, at class creation, a tool signature that cannot work. The model is shown one
    JSON-schema property per named parameter, and its arguments are checked against it and
    passed by name: `*args` / `**kwargs` have no name to show, so every call would fail;
    a positional-only parameter cannot be passed by name. A parameter without a type hint is
    refused too rather than warned about: it becomes an empty schema, so the model must guess
    what to send and nothing checks what it sends (a silent mistake a warning would scroll
    past); the fix is one annotation, and `Any` says "any JSON value" on purpose."""
    for param in params:
        where = f"{owner}.{name}: tool parameter '{param.name}'"
        if param.kind in _VARIADIC:
            raise BadDefinition(
                f"{owner}.{name}: a tool cannot take {_VARIADIC[param.kind]}{param.name}; "
                f"declare each argument as a named parameter with a type hint, e.g. "
                f"`def {name}(self, code: str)`"
            )
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise BadDefinition(f"{where} is positional-only; tools are called by name")
        if param.name not in hints:
            raise BadDefinition(
                f"{where} has no type hint; give it one (`{param.name}: str`, or "
                f"`{param.name}: Any` for any JSON value): the model is shown it and the "
                "arguments it sends are checked against it"
            )


class _Tool:
    """A bound description of one tool: spec for the model, argument model for validation."""

    def __init__(self, name: str, method: Callable[..., Any], owner: str = ""):
        self.name = name
        self.is_async = inspect.iscoroutinefunction(method)
        hints = typing.get_type_hints(method, include_extras=True)
        doc = parse_tool_doc(inspect.getdoc(method) or "")
        fields: dict[str, Any] = {}
        params = list(inspect.signature(method).parameters.values())[1:]
        _check_signature(owner or method.__qualname__.rpartition(".")[0], name, params, hints)
        for param in params:
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
    traces (`harness traces to-tasks --domain REF`) mixes in `TraceReplay` for its hooks.

    `self.state` is the episode's own: read and change it as plain dicts and lists. It is a
    copy-on-write view of the start state the task shares (a dict subclass: only what the
    domain's code reaches is copied, `harness.domains.own_state`), so a real-size database
    costs an episode what its tools reach, not a copy of the whole.

    The class is checked when it is defined, so that a mistake is bad input at its line when
    its module is imported (exit 2), not a failure in a run: `State` is a pydantic model class
    (`State = MyState`, not `MyState()`), every `@tool` signature is checked (see `tool`), and
    a class without the mix-in may not define the hooks' names (`id_patterns`,
    `observed_state`, `expected_state`, `for_state`, `call_data_tool`), which it would not
    use: `class Shop(TraceReplay, Environment)`."""

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
        # a copy-on-write view: the caller's state (a start state a suite shares) is never
        # changed, and only what the tools reach is copied (harness.domains.own_state)
        self.state: dict[str, Any] = own_state(state)
        self.done = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Check the class as it is defined, so that a mistake is bad input located at the
        class (`harness.imports.UserCodeError`), not a failure later in a run."""
        super().__init_subclass__(**kwargs)
        _check_state(cls)
        _check_hooks(cls)
        cls._tools = {
            name: _Tool(name, member, cls.__name__)
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
            return ToolOutcome(f"Error: {_raised(exc)}", is_error=True, crash=_crash(name, exc))
        try:
            return ToolOutcome(json.dumps(result, sort_keys=True))
        except (TypeError, ValueError):  # a bug of the tool, not of the agent
            raise ToolBroken(_not_json(name, result)) from None


def _not_json(name: str, result: Any) -> str:
    """Why a tool's result is not JSON: the first value of a type JSON lacks, and where."""
    pending: list[tuple[str, Any]] = [("", result)]
    while pending:
        where, value = pending.pop(0)
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    return _returned(name, f"a {type(key).__name__} key", f"{where}[{key!r}]")
                pending.append((f"{where}[{key!r}]", item))
        elif isinstance(value, list | tuple):
            pending.extend((f"{where}[{i}]", item) for i, item in enumerate(value))
        elif not (value is None or isinstance(value, str | int | float | bool)):
            return _returned(name, f"a {type(value).__name__}", where)
    return f"tool {name} returned a value json.dumps refuses (a circular reference?)"


def _returned(name: str, what: str, where: str) -> str:
    at = f" at result{where}" if where else ""
    return (
        f"tool {name} returned {what}{at}, which is not JSON; return a dict, list, str, "
        "number, bool or None"
    )


_HOOKS = ("id_patterns", "observed_state", "expected_state", "for_state", "call_data_tool")


def _check_state(cls: type[Environment]) -> None:
    """A domain's `State` is the pydantic model class a task's start state is validated
    against (`State = FerryState`), or None."""
    state: Any = cls.State
    if state is None or (isinstance(state, type) and issubclass(state, BaseModel)):
        return
    if isinstance(state, BaseModel):
        model = type(state).__name__
        raise BadDefinition(
            f"{cls.__name__}.State: expected a pydantic model class (`State = {model}`), "
            f"not an instance of it (`State = {model}(...)`)"
        )
    raise BadDefinition(
        f"{cls.__name__}.State: expected a pydantic model class (a subclass of "
        f"pydantic.BaseModel), got {type(state).__name__} {state!r:.60}"
    )


def _check_hooks(cls: type[Environment]) -> None:
    """Trace hooks are read only from a domain that mixes in `TraceReplay`; on a plain
    `Environment` members of their names would silently not be used (CHANGELOG.md, "Trace
    hooks on a plain Environment"), so they are refused with the fix. `TraceReplay` is known
    by its marker attribute: its module imports this one, so this one cannot import it."""
    if getattr(cls, "_trace_replay_mixin", False):
        return
    named = [h for h in _HOOKS if any(h in vars(k) for k in cls.__mro__ if k is not Environment)]
    if named:
        raise BadDefinition(
            f"{cls.__name__} defines {', '.join(named)}, trace hooks that a plain "
            f"Environment does not use; mix in TraceReplay for them to be hooks: "
            f"`class {cls.__name__}(TraceReplay, Environment)` "
            "(from harness.sdk import TraceReplay), or rename them"
        )


E = TypeVar("E", bound=type[Environment])
DOMAINS: Registry[type[Environment]] = Registry(
    "domain", ("harness.domains.support", "harness.domains.replay"), group="harness.domains"
)


def register_domain(cls: E) -> E:
    """Class decorator: make a domain available to tasks by its `domain` name. Only an
    `Environment` subclass with a name is: anything else would fail at its first use in a run
    (no tools), and a nameless one would be listed as an empty name no task can give."""
    if not (isinstance(cls, type) and issubclass(cls, Environment)):
        name = getattr(cls, "__name__", None) or repr(cls)
        raise BadDefinition(
            f"{name}: expected an Environment subclass, `class {name}(Environment)` "
            "(from harness.sdk import Environment)"
        )
    if not isinstance(cls.domain, str) or not cls.domain.strip():
        raise BadDefinition(
            f'{cls.__name__} has no domain name; add `domain = "..."` to the class '
            "(the name tasks give as `domain:`)"
        )
    DOMAINS.register(cls.domain)(cls)
    return cls


class UnknownDomain(LookupError):
    """A task's `domain:` that names no registered domain, module or file."""


def resolve_domain(reference: str, base: Path | None = None) -> type[Environment]:
    """The environment class a task's `domain:` names: a registered name, an importable
    `package.module:Class`, or a `path/to/file.py:Class` relative to `base` (the task's folder)."""
    from harness.imports import UnresolvedReference, UserCodeError, is_reference, load_reference

    if not is_reference(reference):
        found = DOMAINS.get(reference)
        if found is None:
            from harness.project import where_looked

            ways = ("'path/to/file.py:Class'", "'package.module:Class'")
            raise UnknownDomain(f"{DOMAINS.unknown(reference, *ways)}; {where_looked()}")
        return found
    try:
        found = load_reference(reference, base)
    except UserCodeError:
        raise  # located in the user's file, where the fix is
    except UnresolvedReference as exc:
        raise UnknownDomain(f"domain '{reference}': {exc}") from None
    if not (isinstance(found, type) and issubclass(found, Environment)):
        name = getattr(found, "__name__", None) or reference.rpartition(":")[2]
        raise UnknownDomain(
            f"domain '{reference}': {name} is not an Environment subclass; expected "
            f"`class {name}(Environment)` (from harness.sdk import Environment)"
        )
    return found


def get_domain(name: str) -> type[Environment] | None:
    """The environment class of a domain (bundled domains load on first use)."""
    return DOMAINS.get(name)

"""`TraceReplay`, the mix-in of a domain that plays tasks made from production traces, and the
functions through which the converter and the task loader ask any domain for its hooks: they
give the mix-in's defaults to a domain without it. Hooks are read only from a domain that mixes
in `TraceReplay`: a plain `Environment` subclass's methods of the same names are not hooks."""

from __future__ import annotations

import functools
import json
from typing import Any, ClassVar

from harness.domains.base import Environment, ToolError, _BadArguments, resolve_domain
from harness.specs.task import Task
from harness.transcript import ToolSpec

Calls = list[tuple[str, dict[str, Any], Any]]  # (tool, arguments, result), in order


class TraceReplay:
    """What a domain adds to play tasks made from production traces; a domain author needs only
    `Environment`. A domain that also serves `harness traces to-tasks --domain REF` mixes this
    class in, `class Shop(TraceReplay, Environment)`, and overrides what it knows: `id_patterns`
    (how the tasks name the ids a user mentions), `observed_state(calls)` (the start state that
    production's tool results reveal) and `expected_state(calls)` (the final state a successful
    conversation implies); `calls` are (tool, arguments, result) of production's successful
    tool calls, from any app, so a hook should skip what it does not recognise. A domain whose
    tools are data of the task rather than methods (the bundled `replay` domain) overrides
    `for_state(state)` to return `with_tools(specs)` and answers those tools in
    `call_data_tool(name, arguments)`."""

    _trace_replay_mixin: ClassVar[bool] = True  # how `Environment` knows it (base.py: no import)
    id_patterns: ClassVar[dict[str, str]] = {}
    """The domain's kinds of ids, as name -> regex (e.g. `{"ticket_id": "T-[0-9]+"}`): tasks
    made from production conversations name each id a user mentions by its kind. When none are
    declared, any `AB-123`-like id is an `id`."""

    @classmethod
    def observed_state(cls, calls: Calls) -> dict[str, Any]:
        """The part of a start state that tool results seen in production reveal, as a patch
        over a state snapshot; `calls` are (tool, arguments, result) in order. None known."""
        return {}

    @classmethod
    def expected_state(cls, calls: Calls) -> dict[str, Any]:
        """The final state that production's successful tool calls imply (for a state check)."""
        return {}

    @classmethod
    def for_state(cls, state: dict[str, Any]) -> type[Environment]:
        """The class that plays a task starting from `state`: this class, unless the domain's
        tools are data of the task (the `replay` domain returns `with_tools` of the tools the
        state records). Asked before a task's checks are matched against the tools, and for
        every episode."""
        return cls  # type: ignore[return-value]  # mixed into an Environment

    @classmethod
    def with_tools(cls, specs: list[ToolSpec]) -> type[Environment]:
        """A subclass that also offers tools described by data (name, description, JSON-schema
        parameters, e.g. from an LLM call's `tools`), run by `call_data_tool`; a `@tool` method
        of the same name wins. The same specs give the same class."""
        key = json.dumps([s.model_dump(mode="json") for s in specs], sort_keys=True)
        return _with_tools(cls, key)  # type: ignore[arg-type]  # mixed into an Environment

    def call_data_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """Run a tool that `with_tools` declared, with validated arguments: its JSON result, or
        `ToolError` for a refusal. A domain that declares data tools overrides this."""
        raise ToolError(f"tool '{name}' has no implementation in {type(self).__name__}")


_default_for_state = vars(TraceReplay)["for_state"].__func__


def _hooks(domain: type[Environment]) -> type[TraceReplay]:
    """Where a domain's hooks are read: the domain if it mixes in `TraceReplay`, else the
    mix-in's defaults."""
    return domain if issubclass(domain, TraceReplay) else TraceReplay


def id_patterns(domain: type[Environment]) -> dict[str, str]:
    """The kinds of ids a domain declares (`TraceReplay.id_patterns`); none by default."""
    return dict(_hooks(domain).id_patterns)


def observed_state(domain: type[Environment], calls: Calls) -> dict[str, Any]:
    """`domain.observed_state(calls)`; nothing for a domain without the mix-in."""
    return dict(_hooks(domain).observed_state(calls) or {})


def expected_state(domain: type[Environment], calls: Calls) -> dict[str, Any]:
    """`domain.expected_state(calls)`; nothing for a domain without the mix-in."""
    return dict(_hooks(domain).expected_state(calls) or {})


def tools_of_state(domain: type[Environment]) -> bool:
    """Whether a domain's tools may depend on a task's start state (it overrides `for_state`);
    otherwise they are its methods, whatever the state."""
    hook = _hooks(domain).for_state
    return getattr(hook, "__func__", None) is not _default_for_state


def for_state(domain: type[Environment], state: dict[str, Any]) -> type[Environment]:
    """The class that plays a task of `domain` starting from `state` (`TraceReplay.for_state`):
    the domain itself unless its tools are data of the task."""
    return domain.for_state(state) if tools_of_state(domain) else domain  # type: ignore[attr-defined]


def make_environment(
    task: Task, state: dict[str, Any], domain: type[Environment] | None = None
) -> Environment:
    """A fresh environment of the task's domain holding a copy of `state` (with the tools the
    state declares, for a domain whose tools are data: `TraceReplay.for_state`), as an episode
    and a check's replay of the gold actions build it. `domain` is the class the suite
    resolved for the task, when the caller has it: it is not resolved again."""
    return for_state(domain or resolve_domain(task.domain), state)(state)


class _DataTool:
    """A tool described by data (name, description, JSON-schema parameters), as an app offered
    it to its model; `TraceReplay.call_data_tool` runs it."""

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

    def bind(self, env: Environment) -> Any:
        return lambda **arguments: env.call_data_tool(self.name, arguments)  # type: ignore[attr-defined]


@functools.lru_cache(maxsize=256)
def _with_tools(cls: type[Environment], specs_json: str) -> type[Environment]:
    """`TraceReplay.with_tools`, cached by the specs' JSON text."""
    specs = [ToolSpec.model_validate(s) for s in json.loads(specs_json)]
    namespace = {"__module__": cls.__module__, "__doc__": cls.__doc__}
    subclass: type[Environment] = type(cls.__name__, (cls,), namespace)
    subclass._tools = {**{s.name: _DataTool(s) for s in specs}, **subclass._tools}
    return subclass

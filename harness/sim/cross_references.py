"""A task's references checked against its domain: the tools, tool parameters, checker files
and state fields its checks name, and its gold actions' tools and arguments, must exist (in the
domain bound to the task's start state, whose data may declare tools), so that a check that could
never match is bad input, not a failing task."""

from __future__ import annotations

import datetime
import functools
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from harness.domains import Environment
from harness.domains.trace_replay import for_state, tools_of_state
from harness.sim.env import initial_state
from harness.specs.load import Loaded
from harness.specs.located import PathKey, Problem, SpecError
from harness.specs.state_paths import (
    WrongValue,
    field_type,
    keys_in,
    unknown_state_field,
    wrong_state_values,
)
from harness.specs.task import Task
from harness.specs.validation import error_message, suggestion


def bind_domain(loaded: Loaded[Task], domain: type[Environment]) -> type[Environment] | None:
    """The domain with the tools the task's start state declares (`TraceReplay.for_state`), to
    match the checks against; None while the state cannot be read (its own problem is reported
    when the state is validated)."""
    if not tools_of_state(domain):
        return domain  # its tools are methods, whatever the state
    try:
        return for_state(domain, initial_state(loaded.spec))
    except Exception:
        return None


def check_references(loaded: Loaded[Task], domain: type[Environment]) -> None:
    """The tools, checker files and state fields the checks name, and the gold actions' tools
    and argument names, must exist in the domain (bound to the task's start state, whose data
    may declare tools)."""
    task = loaded.spec
    known = domain.tool_names()
    problems = [
        loaded.problem(
            ("checks", index, *field), f"unknown tool '{tool}'; known: {', '.join(known)}"
        )
        for index, check in enumerate(task.checks)
        for field, tool in check.references().tools.items()
        if tool not in known
    ]
    problems += [
        loaded.problem(("checks", index, *field), message)
        for index, check in enumerate(task.checks)
        for field, (tool, name) in check.references().tool_parameters.items()
        if (message := _unknown_parameter(domain, tool, name)) is not None
    ]
    problems += [
        loaded.problem(("checks", index, *field, *keys), message)
        for index, check in enumerate(task.checks)
        for field, (tool, name, value) in check.references().tool_arguments.items()
        for keys, message in refused_arguments(domain, tool, name, value)
    ]
    problems += [
        loaded.problem(("checks", index, *field), message)
        for index, check in enumerate(task.checks)
        for field, message in check.reference_problems().items()
    ]
    for index, action in enumerate(task.gold_actions):
        where = ("gold_actions", index)
        if action.tool not in known:
            unknown = f"unknown tool '{action.tool}'; known: {', '.join(known)}"
            problems.append(loaded.problem((*where, "tool"), unknown))
            continue
        misnamed = {
            name: message
            for name in action.arguments
            if (message := _unknown_parameter(domain, action.tool, name)) is not None
        }
        problems += [
            loaded.problem((*where, "arguments", name), message)
            for name, message in misnamed.items()
        ]
        problems += [
            loaded.problem((*where, "arguments", name, *keys), message)
            for name, value in action.arguments.items()
            if name not in misnamed
            for keys, message in refused_arguments(domain, action.tool, name, value, False)
        ]
    if domain.State is not None:
        problems += _state_problems(loaded, domain.State)
        problems += _state_value_problems(loaded, domain.State)
    if problems:
        raise SpecError(sorted(problems, key=lambda p: (p.location.line or 0, p.location.col or 0)))


def _unknown_parameter(domain: type[Environment], tool: str, name: str) -> str | None:
    """Why a check naming the argument `name` of `tool` can never match a call (the tool's
    JSON-schema parameters lack it: `reservation` for `reservation_id`), or None. A tool whose
    schema allows other parameters is not judged, nor an unknown tool (reported as such)."""
    if tool not in domain.tool_names():
        return None
    [spec] = domain.tool_specs([tool])
    properties = spec.parameters.get("properties", {})
    closed = spec.parameters.get("additionalProperties") is False
    if not closed or not isinstance(properties, dict) or name in properties:
        return None
    if not properties:
        return f"tool '{tool}' takes no parameters, found '{name}'"
    return f"unknown parameter '{name}' of tool '{tool}'; {suggestion(name, list(properties))}"


def refused_arguments(
    domain: type[Environment], tool: str, name: str, value: Any, compared: bool = True
) -> list[WrongValue]:
    """Where a value written for the parameter `name` of `tool` is one the tool refuses (a
    `Literal` or enum outside its values, text for a number that cannot be read as one, a
    number for text), as (keys inside `value`, message): a call carrying it fails before the
    tool runs, so a check expecting it, or a gold action making it, can never hold. The tool's
    own reading decides: a method tool's parameter type, read as its calls are (pydantic's lax
    mode: `"2"` is a fine int), a data tool's JSON schema. A mapping is partial (a check names
    only the keys it expects), so a key it leaves out is no problem. A value `compared` with
    the calls a transcript recorded (a check's, not a gold action's, which is replayed) is also
    refused as a YAML date, which never equals the JSON text a call carries. An unknown tool or
    parameter is reported as such, not here."""
    if tool not in domain.tool_names():
        return []
    if compared and isinstance(value, datetime.date):  # YAML reads 2026-11-20 as a date
        return [((), f"a YAML date never equals a call's JSON text; quote it: '{value}'")]
    described = domain._tools[tool]  # what validates the tool's calls
    arguments = getattr(described, "arguments", None)
    if isinstance(arguments, type) and issubclass(arguments, BaseModel):
        info = arguments.model_fields.get(name)
        return [] if info is None else _refused_by_type(tool, name, field_type(info), value)
    schema = described.spec.parameters.get("properties", {}).get(name)
    return [] if not isinstance(schema, dict) else _refused_by_schema(tool, name, schema, value)


def _refused_by_type(tool: str, name: str, tp: Any, value: Any) -> list[WrongValue]:
    """`refused_arguments` for a parameter of a Python type, as the tool's argument model reads
    it (lax); a required key a partial mapping leaves out is not refused."""
    try:
        _adapter(tp).validate_python(value)
        return []
    except ValidationError as exc:
        errors = [e for e in exc.errors() if e["type"] != "missing"]
    except Exception:  # a type pydantic cannot build alone: not judged
        return []
    return [
        (keys_in(value, tuple(e["loc"])), _refusal(tool, name, error_message(e, tp)))
        for e in errors[:1]
    ]


def _adapter(tp: Any) -> TypeAdapter[Any]:
    """A parameter type's validator, built once per type (every task of a suite checks the same
    tools' parameters)."""
    try:
        return _adapter_of(tp)
    except TypeError:  # a type with unhashable metadata
        return TypeAdapter(tp)


@functools.lru_cache(maxsize=256)
def _adapter_of(tp: Any) -> TypeAdapter[Any]:
    return TypeAdapter(tp)


def _refused_by_schema(
    tool: str, name: str, schema: dict[str, Any], value: Any
) -> list[WrongValue]:
    """`refused_arguments` for a parameter described by JSON schema, as the tool's calls are
    validated; a required key a partial mapping leaves out is not refused."""
    from jsonschema.validators import validator_for

    try:
        errors = [
            e for e in validator_for(schema)(schema).iter_errors(value) if e.validator != "required"
        ]
    except Exception:  # a schema jsonschema cannot read: the tool's own problem
        return []
    return [(tuple(e.path), _refusal(tool, name, e.message)) for e in errors[:1]]


def _refusal(tool: str, name: str, why: str) -> str:
    """The words of a refused argument value: the tool never receives it, and what it takes."""
    return f"tool '{tool}' refuses this '{name}': {why[:1].lower()}{why[1:]}"


def _state_problems(loaded: Loaded[Task], model: type[BaseModel]) -> list[Problem]:
    """A problem for each state path of a check that names a field the state model lacks; a
    path under one already reported (a nested key of a misspelt one) is not reported again."""
    problems = []
    for index, check in enumerate(loaded.spec.checks):
        paths = check.references().state_paths
        wrong: list[PathKey] = []
        for field in sorted(paths, key=len):
            if any(field[: len(w)] == w for w in wrong):
                continue
            message = unknown_state_field(model, paths[field])
            if message is not None:
                wrong.append(field)
                problems.append(loaded.problem(("checks", index, *field), message))
    return problems


def _state_value_problems(loaded: Loaded[Task], model: type[BaseModel]) -> list[Problem]:
    """A problem for each value a check expects of the state that the state model's field
    refuses (`wrong_state_values`): such a check could never pass, whatever the agent did."""
    return [
        loaded.problem(("checks", index, *field, *keys), message)
        for index, check in enumerate(loaded.spec.checks)
        for field, (path, expected) in check.references().state_values.items()
        for keys, message in wrong_state_values(model, path, expected)
    ]

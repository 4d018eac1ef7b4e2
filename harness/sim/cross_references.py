"""A task's references checked against its domain: the tools, tool parameters, checker files
and state fields its checks name, and its gold actions' tools and arguments, must exist (in the
domain bound to the task's start state, whose data may declare tools), so that a check that could
never match is bad input, not a failing task."""

from __future__ import annotations

from pydantic import BaseModel

from harness.domains import Environment
from harness.domains.trace_replay import for_state, tools_of_state
from harness.sim.env import initial_state
from harness.specs.load import Loaded
from harness.specs.located import PathKey, Problem, SpecError
from harness.specs.state_paths import unknown_state_field, wrong_state_values
from harness.specs.task import Task
from harness.specs.validation import suggestion


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
        problems += [
            loaded.problem((*where, "arguments", name), message)
            for name in action.arguments
            if (message := _unknown_parameter(domain, action.tool, name)) is not None
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

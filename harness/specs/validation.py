"""Validate data against a spec model, turning pydantic's errors into located one-line problems.

pydantic locates an error by model fields (with union tags in between); the user needs the line
of the YAML file that wrote the value, and a message naming what was expected.
"""

from __future__ import annotations

import difflib
import sys
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from harness.secrets import redact
from harness.specs.agent import missing_scripts
from harness.specs.located import (
    Location,
    PathKey,
    Problem,
    SpecError,
    command_memo,
    display,
    format_path,
    nearest,
)

M = TypeVar("M", bound=BaseModel)


def validate(
    model: type[M],
    data: Any,
    positions: Mapping[PathKey, Location],
    source: Path,
    warn: bool = True,
) -> M:
    """Validate data against a spec model, turning every error into a located one-line problem;
    with `warn`, print what is valid but suspect (`rule_warnings`); a spec validated again (a
    persona under a `--set`) was warned about when its file was loaded."""
    try:
        spec = model.model_validate(data)
    except ValidationError as exc:
        default = Location(display(source), 1, 1)
        problems = []
        for error in exc.errors():
            keys = _data_path(data, tuple(error["loc"]))
            problems.append(
                Problem(
                    nearest(positions, keys, default),
                    format_path(keys),
                    error_message(error, model),
                )
            )
        problems.sort(key=lambda p: (p.location.line or 0, p.location.col or 0))
        raise SpecError(problems) from None
    # files no loader resolved (a command line's, a DAG's); templates a rule never fills
    missing = missing_scripts(spec) or rule_problems(spec)
    if missing:
        where = Location(display(source), 1, 1)
        raise SpecError(
            [Problem(nearest(positions, keys, where), format_path(keys), m) for keys, m in missing]
        )
    if warn:
        print_warnings(rule_warnings(spec), positions, source)
    return spec


def rule_problems(spec: BaseModel) -> list[tuple[PathKey, str]]:
    """The rules of a script or of a scripted persona (a persona file's, or a task's inline
    persona's) whose templates name a value the rule never has (`template_errors`)."""
    from harness.specs.persona import Persona
    from harness.specs.script import Script, template_errors
    from harness.specs.task import Task

    if isinstance(spec, Script):
        return template_errors(spec.rules, ("rules",))
    if isinstance(spec, Persona):
        return template_errors(spec.scripted_turns, ("scripted_turns",))
    if isinstance(spec, Task) and isinstance(spec.persona, Persona):
        return template_errors(spec.persona.scripted_turns, ("persona", "scripted_turns"))
    return []


def rule_warnings(spec: BaseModel) -> list[tuple[PathKey, str]]:
    """The rules of a script or of a scripted persona (a persona file's, or a task's inline
    persona's) that can never fire, or whose condition names mislead. The spec is valid: these
    are warnings, not problems."""
    from harness.specs.persona import Persona, persona_warnings
    from harness.specs.script import Script, never_firing
    from harness.specs.task import Task

    if isinstance(spec, Script):
        return never_firing(spec.rules, ("rules",))
    if isinstance(spec, Persona):
        return persona_warnings(spec)
    if isinstance(spec, Task) and isinstance(spec.persona, Persona):
        return persona_warnings(spec.persona, ("persona",), first_turn(spec))
    return []


def first_turn(task: Any) -> int:
    """The turn of a task's persona's first scripted reply: the task's opening user messages
    are the persona's first turns (`PersonaWhen.turn`)."""
    opening = sum(message.role == "user" for message in task.start.history)
    return 1 + opening + (task.start.first_message is not None)


def print_warnings(
    warnings: list[tuple[PathKey, str]], positions: Mapping[PathKey, Location], source: Path
) -> None:
    """Print each warning to stderr as `file:line:col: warning: field.path: message`, once per
    command: a warning neither refuses a file nor changes an exit code. A spec validated again
    from data without positions (a `--set` over a persona) was warned about from its file."""
    if not warnings or not positions:
        return
    memo = command_memo()
    printed: set[str] = memo.setdefault("spec warnings", set()) if memo is not None else set()
    default = Location(display(source), 1, 1)
    for keys, message in warnings:
        where = nearest(positions, keys, default)
        line = redact(f"{where}: warning: {format_path(keys)}: {message}")
        if line not in printed:
            printed.add(line)
            print(line, file=sys.stderr)


def _data_path(data: Any, loc: tuple[Any, ...]) -> PathKey:
    """Map a pydantic error location onto keys of the data, dropping union tags."""
    keys: list[str | int] = []
    current = data
    for part in loc:
        if (isinstance(current, dict) and part in current) or (
            isinstance(current, list) and isinstance(part, int) and part < len(current)
        ):
            current = current[part]
        elif part == "[key]" or _is_union_tag(current, part):
            continue
        else:  # a missing field: name it; its parent carries the position
            current = None
        keys.append(part)
    return tuple(keys)


def _is_union_tag(current: Any, part: Any) -> bool:
    """Whether pydantic added `part` to a location as a union tag rather than a field name."""
    return isinstance(current, dict) and part in (current.get("kind"), "inline")


def error_message(error: Any, model: Any) -> str:
    """One pydantic error as the words of a problem line; `model` (a model or a type holding
    models) names the fields an unknown one may have meant."""
    kind = error["type"]
    if kind == "extra_forbidden":
        unknown = str(error["loc"][-1])
        allowed = _fields_at(model, tuple(error["loc"][:-1])) or []
        if not allowed:
            return f"unknown field '{unknown}'"
        return f"unknown field '{unknown}'; {suggestion(unknown, allowed)}"
    if kind == "missing":
        return "required field is missing"
    if kind == "union_tag_invalid":
        ctx = error["ctx"]
        field, expected = ctx["discriminator"].strip("'"), ctx["expected_tags"].replace("'", "")
        return f"unknown {field} '{ctx['tag']}'; expected one of: {expected}"
    message = str(error["msg"])
    if kind == "model_type":  # "... or instance of PersonaWhen": a class name means nothing here
        message = "Input should be a mapping (`name: value` lines or `{name: value}`)"
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    found = error.get("input")
    if kind != "value_error" and isinstance(found, str | int | float | bool) and found != "":
        message += f", found {found!r}"
    return message


def suggestion(unknown: str, allowed: list[str]) -> str:
    """`did you mean 'x'?` for a close match among the allowed names, else all of them."""
    close = difflib.get_close_matches(unknown, allowed, n=1)
    return f"did you mean '{close[0]}'?" if close else f"expected one of: {', '.join(allowed)}"


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str] | None:
    """The field names of the model found at a pydantic error location, for 'did you mean'."""
    current: Any = model
    for part in loc:
        current = _step(current, part)
        if current is None:
            return None
    if not is_model(current):
        return None
    return [info.alias or name for name, info in current.model_fields.items()]


def is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _step(tp: Any, part: Any) -> Any:
    tp = unwrap(tp)
    if is_model(tp):
        info = tp.model_fields.get(part) or next(
            (f for f in tp.model_fields.values() if f.alias == part), None
        )
        return info.annotation if info else None
    options = union_members(tp)
    if options:
        for option in options:
            option = unwrap(option)
            if is_model(option) and _literal_kind(option) == part:
                return option
        models = [o for o in map(unwrap, options) if is_model(o)]
        return _step(models[0], part) if len(models) == 1 else None
    origin = typing.get_origin(tp)
    if origin in (list, tuple) and isinstance(part, int):
        return typing.get_args(tp)[0]
    if origin is dict:
        return typing.get_args(tp)[1]
    return None


def unwrap(tp: Any) -> Any:
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def union_members(tp: Any) -> tuple[Any, ...]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return typing.get_args(tp)
    return ()


def _literal_kind(model: type[BaseModel]) -> Any:
    info = model.model_fields.get("kind")
    if info is None or typing.get_origin(info.annotation) is not typing.Literal:
        return None
    return typing.get_args(info.annotation)[0]

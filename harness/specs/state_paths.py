"""State paths checked against a domain's state model, so that a check reading a field the state
can never hold (a typo such as `appointmnets`) is bad input found before anything runs, not a
failure of the agent found after.

A path is a JSONPath (`$.items['A-1'].status`, `$.payments[?item_id = 'A-1'].amount`). Each
field it names must be a field of the model it reaches; the keys of a `dict[str, Model]` field
may be anything (the path goes on in `Model`); indices, slices, wildcards and filters select
items. Whatever cannot be followed (`..`, unions of models, `Any`, a model that allows extra
fields) is accepted: only a field the model surely lacks is reported.
"""

from __future__ import annotations

import collections.abc
import datetime
import functools
import json
import re
import threading
import typing
from collections.abc import Iterator
from typing import Annotated, Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from harness.specs.validation import is_model, suggestion, union_members, unwrap

MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)
SEQUENCES = (list, tuple, set, frozenset, collections.abc.Sequence, collections.abc.Set)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RESERVED = {"where", "wherenot"}  # words the JSONPath grammar takes for operators


class _Unknown(Exception):
    """A field the model at that step does not have."""


def key_path(keys: tuple[str | int, ...]) -> str | None:
    """The JSONPath of keys into the state (`('items', 'A-1')` -> `$.items['A-1']`), or None
    when a key cannot be written in one."""
    path = "$"
    for key in keys:
        if isinstance(key, int):
            path += f"[{key}]"
        elif _IDENTIFIER.fullmatch(key) and key not in _RESERVED:
            path += f".{key}"
        elif "\\" in key:
            return None
        else:
            path += "['" + key.replace("'", "\\'") + "']"
    return path


@functools.lru_cache(maxsize=1024)
def parse_jsonpath(path: str) -> Any:
    """A parsed JSONPath (jsonpath-ng's extended grammar), parsed once per process (every task
    that names a path has it parsed when it is loaded, checked and graded) by one parser
    (`jsonpath_ng.ext.parse` builds a parser per call: a third of a millisecond, and 40 ms for
    the first). Raises what jsonpath-ng raises."""
    parser, lock = _parser()
    with lock:  # a PLY parser keeps its stacks on itself
        return parser.parse(path)


@functools.cache
def _parser() -> tuple[Any, threading.Lock]:
    from jsonpath_ng.ext.parser import ExtendedJsonPathParser

    return ExtendedJsonPathParser(), threading.Lock()


def unknown_state_field(model: type[BaseModel], path: str) -> str | None:
    """Why `path` can select nothing in a state of `model` (a field it does not have), or None
    when it may select something, as far as the model tells."""
    try:
        steps = _steps(parse_jsonpath(path))
    except Exception:  # jsonpath-ng raises several types; the check reports a bad path itself
        return None
    current: Any = model
    try:
        for step in steps:
            current = _follow(current, step)
            if current is None:
                return None
    except _Unknown as exc:
        return str(exc)
    return None


def wrong_state_values(model: type[BaseModel], path: str, expected: Any) -> list[WrongValue]:
    """Where a value a check expects at `path` in a state of `model` can never equal what the
    state holds: a value the field's type refuses (a `Literal` outside its values, a string for
    a number), as (keys inside `expected`, message). A mapping is partial (it names only the
    keys it expects); any other value, lists included, is compared whole. A field the model
    lacks is `unknown_state_field`'s to report; a type that cannot be followed is accepted."""
    try:
        steps = _steps(parse_jsonpath(path))
    except Exception:  # jsonpath-ng raises several types; the check reports a bad path itself
        return []
    current: Any = model
    try:
        for step in steps:
            current = _follow(current, step)
            if current is None:
                return []
    except _Unknown:
        return []
    return list(_wrong_values(current, expected, ()))


WrongValue = tuple[tuple[str | int, ...], str]
"""Keys inside an expected value, and why the state can never hold what they lead to."""


def _wrong_values(tp: Any, expected: Any, keys: tuple[str | int, ...]) -> Iterator[WrongValue]:
    """The values below `expected` (written where the state holds a `tp`) that `tp` refuses."""
    one = _one_type(tp)
    if isinstance(expected, dict):
        if one is None:
            return  # `Any`, or a union: a partial mapping cannot tell which member
        if is_model(one):
            fields = {info.alias or name: info for name, info in one.model_fields.items()}
            fields |= dict(one.model_fields)
            for key, value in expected.items():
                if key in fields:  # an unknown one is `unknown_state_field`'s
                    yield from _wrong_values(field_type(fields[key]), value, (*keys, key))
            return
        if typing.get_origin(one) in MAPPINGS:
            inner = _value_type(one)
            for key, value in expected.items() if inner is not None else ():
                yield from _wrong_values(inner, value, (*keys, key))
            return
    refused = _refused(tp, expected)
    if refused is not None:
        yield (*keys, *refused[0]), refused[1]


def _refused(tp: Any, expected: Any) -> WrongValue | None:
    """Why the state can never hold `expected` where it holds a `tp`, with the keys inside
    `expected` at fault; None when it can. The state is JSON: a value is taken as JSON gives it
    (strictly: no string for a number), unless the field's lax reading equals it (`1.0` for an
    int compares equal at run time)."""
    from pydantic import TypeAdapter, ValidationError

    from harness.matching import partial_mismatches
    from harness.specs.validation import error_message

    if isinstance(expected, datetime.date):  # YAML reads 2026-11-20 as a date
        iso = expected.isoformat()
        return (), f"a YAML date never equals the state's JSON text; quote it: '{iso}'"
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(tp)
        text = json.dumps(expected, default=str)
    except Exception:  # a type pydantic cannot build alone: not judged
        return None
    try:
        adapter.validate_json(text, strict=True)
        return None
    except ValidationError as exc:
        errors = exc.errors()
    if any(e["type"] == "extra_forbidden" for e in errors):
        return None  # an unknown field inside: `unknown_state_field` reports it, first
    try:
        lax = adapter.dump_python(adapter.validate_python(expected), mode="json", by_alias=True)
        if not partial_mismatches(expected, lax):
            return None
    except ValidationError:
        pass
    error = errors[0]
    keys = keys_in(expected, tuple(error["loc"]))
    if error["type"] == "missing":  # name the missing field; its parent has the position
        keys += (error["loc"][-1],)
    return keys, error_message(error, tp)


def keys_in(value: Any, loc: tuple[Any, ...]) -> tuple[str | int, ...]:
    """The part of a pydantic error location that indexes into `value` (union tags dropped)."""
    keys: list[str | int] = []
    for part in loc:
        inside = isinstance(value, dict) and part in value
        inside |= isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value)
        if inside:
            value = value[part]
            keys.append(part)
    return tuple(keys)


def _steps(expr: Any) -> list[Any]:
    """The steps of a path from the root, in order; a step that cannot be followed comes last."""
    from jsonpath_ng import jsonpath

    if isinstance(expr, jsonpath.Child):
        return _steps(expr.left) + _steps(expr.right)
    if isinstance(expr, jsonpath.Root | jsonpath.This):
        return []
    if isinstance(expr, jsonpath.Descendants | jsonpath.Where):
        return [*_steps(expr.left), expr]
    return [expr]


def _follow(tp: Any, step: Any) -> Any:
    """The type a step reaches from `tp`; None when it cannot tell. Raises `_Unknown`."""
    from jsonpath_ng import jsonpath
    from jsonpath_ng.ext.filter import Filter

    tp = _one_type(tp)
    if tp is None:
        return None
    wildcard = getattr(jsonpath, "Wildcard", ())
    if isinstance(step, jsonpath.Fields) and "*" not in step.fields:
        if is_model(tp):
            return _fields(tp, step.fields)
        return _value_type(tp)
    if isinstance(step, jsonpath.Index | jsonpath.Slice):
        return _item_type(tp)
    if isinstance(step, jsonpath.Fields | Filter | wildcard):
        return _item_type(tp) or _value_type(tp)
    return None


def _fields(model: type[BaseModel], names: tuple[str, ...]) -> Any:
    by_name = dict(model.model_fields)
    by_name.update({info.alias: info for info in model.model_fields.values() if info.alias})
    for name in names:
        if name not in by_name and model.model_config.get("extra") != "allow":
            known = [info.alias or field for field, info in model.model_fields.items()]
            raise _Unknown(f"unknown state field '{name}'; {suggestion(name, known)}")
    return field_type(by_name[names[0]]) if len(names) == 1 and names[0] in by_name else None


def field_type(info: FieldInfo) -> Any:
    """A field's type with its constraints (`ge=0` on a price), as a `TypeAdapter` takes it."""
    return Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation


def _one_type(tp: Any) -> Any:
    """The one type a value of `tp` has (`X | None` is `X`); None for `Any` or a union."""
    tp = unwrap(tp)
    members = union_members(tp)
    if members:
        kept = [m for m in members if m is not type(None)]
        return _one_type(kept[0]) if len(kept) == 1 else None
    return None if tp is Any else tp


def _value_type(tp: Any) -> Any:
    """The value type of a mapping type (any key is allowed), else None."""
    args = typing.get_args(tp)
    return args[1] if typing.get_origin(tp) in MAPPINGS and len(args) == 2 else None


def _item_type(tp: Any) -> Any:
    """The item type of a homogeneous sequence type, else None."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin not in SEQUENCES or not args:
        return None
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        return None
    return args[0]

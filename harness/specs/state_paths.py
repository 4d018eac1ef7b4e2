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
import functools
import re
import threading
import typing
from typing import Any

from pydantic import BaseModel

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
    return by_name[names[0]].annotation if len(names) == 1 and names[0] in by_name else None


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

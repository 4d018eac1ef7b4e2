"""Weave's objects as plain JSON data: the one conversion every reader and writer of traces uses.

What weave 0.54 hands back for a recorded value is rarely plain: a call read through the client
has `WeaveDict` / `WeaveList` containers whose item access dereferences refs, `Boxed` numbers and
strings, and, for anything that was a pydantic model or a dataclass when recorded (an Anthropic
`Message`, an OpenAI `ChatCompletionMessage` an app put back in its history, a `ToolUseBlock`),
an `ObjectRecord` wrapped in a `WeaveObject`. Serialised by `json.dumps(default=str)`, such an
object becomes the text `"ObjectRecord({...})"`, and every reply of the model is silently lost.
A JSONL export made by the W&B API instead carries the same objects as dicts with `_type`,
`_class_name` and `_bases` keys. `plain` reads all of them as the data they stand for, whatever
library weave patched (openai, anthropic, mistral, litellm, ...), because it reads weave's
containers and Python's data types, never a provider's classes.

- `ObjectRecord`, `WeaveObject`, pydantic models, dataclasses, named tuples: a dict of their
  fields, without weave's `_class_name` / `_bases` bookkeeping and without methods or ops;
- `WeaveDict`, `WeaveList`, other mappings and sequences: dicts and lists, read with the base
  class's access so that no ref is dereferenced (no server round trip per value);
- `Boxed` values, enums, `Decimal`: the plain value; datetimes: ISO-8601 text; timedeltas:
  seconds; bytes: text (UTF-8, undecodable bytes replaced);
- a ref (`weave:///...`): its URI, as weave writes it;
- an argument the caller did not give (the SDKs' `Omit` / `NotGiven` sentinels, or weave's text
  of one, `<anthropic.Omit object at 0x...>`, `NOT_GIVEN`): left out of its mapping, so that
  `stream` reads as absent rather than as a non-empty string;
- anything else: its `repr`, as weave itself records what it cannot serialise.

Importing this module does not import weave: weave's classes are looked up only once weave is
loaded, and a value of theirs cannot exist before.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

_SCALARS = (str, int, float, bool, type(None))
_WEAVE_KEYS = ("_class_name", "_bases")  # weave's bookkeeping in an encoded object record
# What weave records for an argument left out: the sentinel's repr (`stringify`).
_NOT_GIVEN_TEXT = re.compile(r"NOT_GIVEN|<[\w.]*\b(?:Omit|NotGiven) object at 0x[0-9a-fA-F]+>")
_NOT_GIVEN_TYPES = frozenset({"Omit", "NotGiven"})
_NEVER_SENTINELS = frozenset({int, float, bool, type(None), dict, list})  # the common values


class _Weave:
    """weave's classes, looked up once weave is imported; before, no value can be one of them
    (and `isinstance(x, ())` is never true)."""

    loaded = False
    object_record: tuple[Any, ...] = ()
    weave_object: tuple[Any, ...] = ()
    ref: tuple[Any, ...] = ()

    @classmethod
    def load(cls) -> None:
        if cls.loaded or "weave.trace.vals" not in sys.modules:
            return
        from weave.trace.object_record import ObjectRecord
        from weave.trace.refs import Ref
        from weave.trace.vals import WeaveObject

        cls.object_record, cls.weave_object, cls.ref = (ObjectRecord,), (WeaveObject,), (Ref,)
        cls.loaded = True


def plain(
    value: Any,
    *,
    text: Callable[[str], str] | None = None,
    keep: tuple[type, ...] = (),
    defaults: bool = True,
) -> Any:
    """`value` as JSON data (dicts with string keys, lists, str, int, float, bool, None); see the
    module's docstring for what each kind of object becomes.

    The options are for a writer (`Tracer` records inputs and outputs through this function):
    `text` rewrites every string (redaction); values of a `keep` type are returned as they are
    (weave's own objects, which weave saves as refs); `defaults=False` leaves pydantic fields at
    their default out (weave pays for every leaf it records). A reader uses none of them."""
    return _Plain(text, keep, defaults).value(value)


class _Plain:
    __slots__ = ("defaults", "keep", "text")

    def __init__(
        self, text: Callable[[str], str] | None, keep: tuple[type, ...], defaults: bool
    ) -> None:
        self.text, self.keep, self.defaults = text, keep, defaults

    def value(self, value: Any) -> Any:
        kind = type(value)
        if kind is str:  # the common cases first, by exact type: a trace is mostly these
            return value if self.text is None else self.text(value)
        if kind is dict:
            return self.mapping(value.items())
        if kind is list or kind is tuple:
            return [self.value(item) for item in value]
        if kind in _SCALARS:
            return value
        if self.keep and isinstance(value, self.keep):
            return value
        return self.other(value)

    def mapping(self, items: Any) -> Any:
        out: dict[str, Any] = {}
        for key, item in items:
            if type(item) not in _NEVER_SENTINELS and _not_given(item):
                continue
            out[key if type(key) is str else str(self.value(key))] = self.value(item)
        if "_class_name" in out or out.get("_type") == "ObjectRecord":  # weave's encoding
            for name in (*_WEAVE_KEYS, "_type"):
                out.pop(name, None)
        elif out.get("_type") == "CustomWeaveType" and "val" in out:  # e.g. a datetime
            return out["val"]
        return out

    def other(self, value: Any) -> Any:
        """Everything that is not an exact JSON type."""
        _Weave.load()
        if isinstance(value, _Weave.weave_object):
            return self.value(object.__getattribute__(value, "_val"))
        if isinstance(value, _Weave.object_record):
            return self.fields(vars(value))
        if isinstance(value, _Weave.ref):
            return str(value.uri)
        if isinstance(value, enum.Enum):
            return self.value(value.value)
        if isinstance(value, bool):
            return bool(value)
        if isinstance(value, str):  # a `BoxedStr`, a str subclass: the plain text
            return self.value(str.__str__(value))
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            return float(value)
        if isinstance(value, Mapping):  # `WeaveDict` and any other mapping, refs left as refs
            return self.mapping(dict.items(value) if isinstance(value, dict) else value.items())
        as_dict = getattr(value, "_asdict", None)
        if isinstance(value, tuple) and callable(as_dict):  # a named tuple
            return self.value(as_dict())
        if isinstance(value, list):  # `WeaveList`, whose own iteration dereferences refs
            return [self.value(item) for item in list.__iter__(value)]
        if isinstance(value, tuple):
            return [self.value(item) for item in value]
        if isinstance(value, set | frozenset):
            return sorted((self.value(item) for item in value), key=repr)
        if isinstance(value, datetime.datetime | datetime.date | datetime.time):
            return value.isoformat()
        if isinstance(value, datetime.timedelta):
            return value.total_seconds()
        if isinstance(value, decimal.Decimal):
            return int(value) if value == value.to_integral_value() else float(value)
        if isinstance(value, bytes | bytearray):
            return self.value(bytes(value).decode("utf-8", errors="replace"))
        if isinstance(value, type):  # a class: its name, as weave records it
            return self.value(_text(value))
        dump = getattr(value, "model_dump", None)
        if callable(dump):  # a pydantic model
            try:
                dumped = dump(mode="json", exclude_defaults=not self.defaults)
            except Exception:  # a model that cannot dump itself: its fields as they are
                fields = getattr(type(value), "model_fields", {})
                dumped = {name: getattr(value, name, None) for name in fields}
            return self.value(dumped)
        if dataclasses.is_dataclass(value):
            return self.fields({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
        to_dict = getattr(value, "to_dict", None)
        if callable(to_dict):
            try:
                return self.value(to_dict())
            except Exception:
                pass
        return self.value(_text(value))

    def fields(self, attributes: dict[str, Any]) -> Any:
        """An object's data fields: not weave's bookkeeping, not its methods or ops."""
        data = {
            name: item
            for name, item in attributes.items()
            if name not in _WEAVE_KEYS and not callable(item) and not _bookkeeping(name, item)
        }
        return self.mapping(data.items())


def _bookkeeping(name: str, value: Any) -> bool:
    """weave's own `ref` attribute on an object it saved, not one of the object's fields."""
    return name == "ref" and (value is None or isinstance(value, _Weave.ref))


def _not_given(value: Any) -> bool:
    """An argument the caller left out, as the SDKs mark it (or as weave recorded the mark)."""
    if isinstance(value, str):
        return value[:1] in ("<", "N") and _NOT_GIVEN_TEXT.fullmatch(value) is not None
    return type(value).__name__ in _NOT_GIVEN_TYPES


def _text(value: Any) -> str:
    try:
        return repr(value)
    except Exception:
        return f"<{type(value).__name__}>"

"""An environment's state as a copy-on-write view of the start state its task shares.

A suite's tasks share one start state (a 3 MB database read once per command); an episode's
tools change its own state in place (`self.state["reservations"][rid]["cabin"] = "business"`).
Copying the whole state per episode, and then walking the whole of it to find what changed,
were most of a real-size run. Instead the environment's state is an `OwnDict` over the start
state: a dict whose values start out as the start state's own, and a value is copied only when
code reaches it. Every value a mapping hands out (`state[k]`, `get`, `items()`, `values()`,
`pop`, `dict(state)`, `{**state}`, a copy) is first made the episode's own, whoever asks (the
domain's tools, its `__init__`, an override of `call`): a mapping becomes an `OwnDict` holding
its values (copied one level, its children still shared until reached in turn), a list a deep
copy (`OwnList`: the C-level ways of reading a list, `sorted`, `list()`, unpacking, bypass any
method, so a list holds nothing shared). A value the code stores is its own, kept as given (so
a reference it keeps still changes the state).

The harness reads the final state as stored (`dict.items(state)`, `dict.__getitem__`):
`harness.state_diff.state_changes` finds what changed by identity, walking only what was
reached, and the final state shares everything else with the start state. A reader that goes
through the mapping's methods instead is still right, only slower (it copies what it reads).
"""

from __future__ import annotations

from typing import Any

from harness.specs.located import copy_data

_SCALARS = frozenset({str, int, float, bool, type(None)})


class OwnList(list):  # type: ignore[type-arg]
    """A list of the episode's own: a deep copy, holding nothing shared with the start state."""

    __slots__ = ()


class OwnDict(dict):  # type: ignore[type-arg]
    """A mapping of the episode's own whose values may still be the start state's (see the
    module's doc); `_mine` holds the keys whose value a tool stored (its own, kept as given)."""

    __slots__ = ("_mine",)

    def __init__(self, shared: dict[Any, Any]):
        super().__init__(shared)
        self._mine: set[Any] = set()

    def _own(self, key: Any, value: Any) -> Any:
        """`value`, at `key`, made the episode's own (unless it is already)."""
        kind = type(value)
        if kind in _SCALARS or kind is OwnDict or kind is OwnList or key in self._mine:
            return value
        if kind is dict:
            mine: Any = OwnDict(value)
        elif kind is list:
            mine = OwnList(copy_data(value))
        else:
            mine = copy_data(value)
        dict.__setitem__(self, key, mine)
        return mine

    def _own_all(self) -> None:
        for key, value in list(dict.items(self)):
            self._own(key, value)

    def __getitem__(self, key: Any) -> Any:
        return self._own(key, dict.__getitem__(self, key))

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if dict.__contains__(self, key) else default

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if dict.__contains__(self, key):
            return self[key]
        self[key] = default
        return default

    def pop(self, key: Any, *default: Any) -> Any:
        if dict.__contains__(self, key):  # made the episode's own before it is handed out
            self._own(key, dict.__getitem__(self, key))
        self._mine.discard(key)
        return dict.pop(self, key, *default)

    def popitem(self) -> tuple[Any, Any]:
        key = next(reversed(self))
        return key, self.pop(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._mine.add(key)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: Any) -> None:
        self._mine.discard(key)
        dict.__delitem__(self, key)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other: Any) -> OwnDict:  # type: ignore[override,misc]
        self.update(other)
        return self

    def clear(self) -> None:
        self._mine.clear()
        dict.clear(self)

    def __iter__(self) -> Any:  # defined so that `dict(d)` and `{**d}` go through `__getitem__`
        return dict.__iter__(self)

    def values(self) -> Any:
        self._own_all()
        return dict.values(self)

    def items(self) -> Any:
        self._own_all()
        return dict.items(self)

    def copy(self) -> dict[Any, Any]:
        self._own_all()
        return dict(dict.items(self))

    def __or__(self, other: Any) -> dict[Any, Any]:  # type: ignore[override]
        return self.copy() | dict(other)

    def __reduce__(self) -> Any:  # a copy or a pickle is a plain dict of what it holds
        return (dict, (dict(self.items()),))

    def __reduce_ex__(self, protocol: Any) -> Any:
        return self.__reduce__()


def own_state(state: dict[str, Any]) -> OwnDict:
    """A copy-on-write view of a start state (which is never changed)."""
    return OwnDict(state)

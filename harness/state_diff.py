"""A state as its start and what changed: how the results store keeps episodes' final states
and the tasks' shared start states, so that an episode costs what it changed, not the size of
the database it ran on.

A change is `{"path": [keys], "value": v}` (set) or `{"path": [keys], "removed": true}`. Lists
are compared item by item while the final list is at least as long (an appended record is one
change); a list that shrank is replaced whole.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any

from harness.specs.digest import canonical

_KEPT = 16
# id -> (state, its canonical JSON encoded, the sha256 of that)
_TEXTS: OrderedDict[int, tuple[Any, bytes, str]] = OrderedDict()


def _canonical(state: Any) -> tuple[bytes, str]:
    """The state's canonical JSON (UTF-8) and its sha256, worked out once per state object (the
    start states a suite shares are never changed; the object is held, so its id stays its)."""
    kept = _TEXTS.get(id(state))
    if kept is not None and kept[0] is state:
        _TEXTS.move_to_end(id(state))
        return kept[1], kept[2]
    text = canonical(state).encode()
    digest = hashlib.sha256(text).hexdigest()
    _TEXTS[id(state)] = (state, text, digest)
    while len(_TEXTS) > _KEPT:
        _TEXTS.popitem(last=False)
    return text, digest


def canonical_state_bytes(state: Any) -> bytes:
    """`harness.specs.digest.canonical` of a state, encoded, cached per state object."""
    return _canonical(state)[0]


def canonical_state(state: Any) -> str:
    """`harness.specs.digest.canonical` of a state."""
    return _canonical(state)[0].decode()


def state_digest(state: Any) -> str:
    """The sha256 of a state's canonical JSON, cached per state object."""
    return _canonical(state)[1]


def state_changes(start: Any, final: Any, path: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    """What turns `start` into `final` (see the module's doc); [] when they are equal."""
    if isinstance(start, dict) and isinstance(final, dict):
        found: list[dict[str, Any]] = []
        # read as stored: an environment's state (`harness.domains.own_state`) holds, as they
        # are, the start state's values no tool reached, so what no tool reached is skipped
        for key, value in dict.items(final):
            if key not in start:
                found.append({"path": [*path, key], "value": value})
            elif value is not start[key]:
                found += state_changes(start[key], value, (*path, key))
        found += [{"path": [*path, key], "removed": True} for key in start if key not in final]
        return found
    if isinstance(start, list) and isinstance(final, list) and len(final) >= len(start):
        found = []
        for n, value in enumerate(final):
            if n >= len(start):
                found.append({"path": [*path, n], "value": value})
            elif value is not start[n]:
                found += state_changes(start[n], value, (*path, n))
        return found
    if start == final and type(start) is type(final):
        return []
    return [{"path": list(path), "value": final}]


_LAST_CHANGES: list[tuple[Any, Any, list[dict[str, Any]]]] = []


def changes_between(start: Any, final: Any) -> list[dict[str, Any]]:
    """`state_changes`, worked out once for the same two state objects when asked twice in a
    row (an episode's final state is written to its trace, then to the results store). Only
    the last pair is kept: each final state held is a whole database kept alive (16 of them
    were two thirds of a 3 MB state's run's peak memory)."""
    if _LAST_CHANGES and _LAST_CHANGES[0][0] is start and _LAST_CHANGES[0][1] is final:
        return _LAST_CHANGES[0][2]
    found = state_changes(start, final)
    _LAST_CHANGES[:] = [(start, final, found)]
    return found


def apply_changes(start: Any, changes: list[dict[str, Any]]) -> Any:
    """The final state: `start` with `changes` applied, sharing every part they leave alone
    with `start` (only the containers on a changed path are copied, one level each); `start`
    is not changed, and the result must not be changed either."""
    state = start
    for change in changes:
        keys = change["path"]
        if not keys:
            state = change["value"]
            continue
        state = _copied_path(state, keys, change)
    return state


def _copied_path(node: Any, keys: list[Any], change: dict[str, Any]) -> Any:
    """A shallow copy of `node` with the change applied below it along `keys`."""
    copied: Any = dict(node) if isinstance(node, dict) else list(node)
    key = keys[0]
    if len(keys) > 1:
        copied[key] = _copied_path(copied[key], keys[1:], change)
    elif change.get("removed"):
        del copied[key]
    elif isinstance(copied, list) and key == len(copied):
        copied.append(change["value"])
    else:
        copied[key] = change["value"]
    return copied

"""A tau2 database that a suite's episodes share, and each episode's copy-on-access view of it.

tau2's tools work on a pydantic database (airline's `FlightDB`: flights, users, reservations,
each a table of records by id) and change its records in place. Validating tau2's 7 MB airline
database takes about 140 ms and a whole copy about 100 ms; per episode (and per gold replay)
they were most of a run's time, and the whole database dumped after every write most of the
rest. So:
- the database of a start state is validated once per process (`Shared`) and never changed;
- an episode's database (`View.database`) holds, per table, the shared records; a record a
  tool takes by key (`table[id]`, `get`, `pop`, `setdefault`; tau2's `_get_reservation` and
  the like) is first replaced by the episode's own deep copy (a few records per call), and a
  record the tool sets or removes is the episode's;
- records handed out by iteration (`values()`, `items()`: tau2's searches, 300 flights) are the
  shared ones, not copied; after the call they are compared with a pristine copy, and one that
  the tool changed becomes the episode's while the shared one is restored (`View.settle`): a
  tool that changes what it iterates over is still confined to its episode;
- what the episode changed is worked out from the records it took alone: after each call each
  is dumped and compared with the harness state (`View.settle`), which gets a new table for
  what differs and shares every other record with the start state. A record equal to its start
  again is handed back to the shared one, so later calls compare only what the episode holds.

A tool call runs to its end before another starts on the same shared database (`Shared.lock`:
tau2's tools are synchronous), so a shared record lent to one call is never seen changed by
another.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

_KEPT = 4
# id of a start state -> (the state, its database): the start states a suite shares are never
# changed, and the state is held so its id stays its own
_SHARED: OrderedDict[tuple[int, type[BaseModel]], tuple[dict[str, Any], Shared]] = OrderedDict()
_LOCK = threading.Lock()


def shared(model: type[BaseModel], state: dict[str, Any]) -> Shared:
    """The database `model` validated from `state` (a start state: never changed), once per
    state object for the last few."""
    key = (id(state), model)
    with _LOCK:
        kept = _SHARED.get(key)
        if kept is not None and kept[0] is state:
            _SHARED.move_to_end(key)
            return kept[1]
        found = Shared(model, state)
        _SHARED[key] = (state, found)
        while len(_SHARED) > _KEPT:
            _SHARED.popitem(last=False)
        return found


class Shared:
    """A start state's database, validated once, with what a view needs to check what the
    tools did: the state's tables by field (`tables`: the field's name -> its key in the
    state) and, made at the first lend of a table, a pristine copy of its records."""

    def __init__(self, model: type[BaseModel], state: dict[str, Any]):
        self.model = model
        self.database = model.model_validate(state)
        self.start = state
        fields = self.database.__dict__
        self.tables = {
            name: model.model_fields[name].alias or name
            for name, value in fields.items()
            if isinstance(value, dict)
        }
        self.lock = threading.RLock()
        self._pristine: dict[str, dict[str, Any]] = {}

    def pristine(self, name: str) -> dict[str, Any]:
        """A deep copy of a table's records as validated, made once, at its first lend (before
        any tool holds them)."""
        if name not in self._pristine:
            self._pristine[name] = copy.deepcopy(self.database.__dict__[name])
        return self._pristine[name]


class Table(dict):  # type: ignore[type-arg]
    """One table of an episode's database: the shared records until taken (see the module's
    doc). `taken` holds the keys whose entry is the episode's own (copied, set or removed);
    `lent` says the shared records were handed out by iteration since the last settle."""

    def __init__(self, records: dict[str, Any], lending: Callable[[], object]):
        super().__init__(records)
        self.taken: set[Any] = set()
        self.lent = False
        self._lending = lending  # called before shared records are handed out

    def _lend(self) -> None:
        if not self.lent:
            self._lending()
            self.lent = True

    def _take(self, key: Any) -> None:
        if key not in self.taken:
            self.taken.add(key)
            if dict.__contains__(self, key):
                dict.__setitem__(self, key, copy.deepcopy(dict.__getitem__(self, key)))

    def __getitem__(self, key: Any) -> Any:
        self._take(key)
        return dict.__getitem__(self, key)

    def get(self, key: Any, default: Any = None) -> Any:
        self._take(key)
        return dict.get(self, key, default)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        self._take(key)
        return dict.setdefault(self, key, default)

    def pop(self, key: Any, *default: Any) -> Any:
        self._take(key)
        return dict.pop(self, key, *default)

    def popitem(self) -> tuple[Any, Any]:
        key = next(reversed(self))
        return key, self.pop(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.taken.add(key)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: Any) -> None:
        self.taken.add(key)
        dict.__delitem__(self, key)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other: Any) -> Table:  # type: ignore[override,misc]
        self.update(other)
        return self

    def clear(self) -> None:
        self.taken.update(self)
        dict.clear(self)

    def values(self) -> Any:
        self._lend()
        return dict.values(self)

    def items(self) -> Any:
        self._lend()
        return dict.items(self)

    def copy(self) -> dict[Any, Any]:
        self._lend()
        return dict(dict.items(self))

    def __or__(self, other: Any) -> dict[Any, Any]:  # type: ignore[override]
        return self.copy() | dict(other)


class View:
    """An episode's database over a shared one (see the module's doc)."""

    def __init__(self, base: Shared):
        self.base = base
        fields = dict(base.database.__dict__)
        self.tables = {
            name: Table(fields[name], functools.partial(base.pristine, name))
            for name in base.tables
        }
        others = {n: copy.deepcopy(v) for n, v in fields.items() if n not in self.tables}
        self.database = base.model.model_construct(
            _fields_set=set(base.database.model_fields_set), **others, **self.tables
        )

    def settle(self, state: dict[str, Any]) -> None:
        """After a tool call: restore shared records a tool changed while lent (they become the
        episode's), then bring `state` (the harness state, whose tables may be shared with the
        start state: only replaced, never changed) to the database's records."""
        for name, table in self.tables.items():
            if table.lent:
                self._returned(name, table)
            if table.taken:
                self._settled(name, table, state)
        for name, value in self.database.__dict__.items():  # fields that are not tables
            if name not in self.tables:
                dumped = to_jsonable_python(value, by_alias=True)
                key = self.base.model.model_fields[name].alias or name
                if key not in state or state[key] != dumped:
                    state[key] = dumped

    def _returned(self, name: str, table: Table) -> None:
        """The shared records lent by iteration, checked: one a tool changed is the episode's,
        and the shared one is restored in place (other views hold it) from the pristine copy."""
        table.lent = False
        shared, pristine = self.base.database.__dict__[name], self.base.pristine(name)
        if shared == pristine:
            return
        for key, record in shared.items():
            if record != pristine[key]:
                mine = copy.deepcopy(record)
                _restore(record, pristine[key])
                table.taken.add(key)
                if dict.get(table, key) is record:
                    dict.__setitem__(table, key, mine)

    def _settled(self, name: str, table: Table, state: dict[str, Any]) -> None:
        """The records the episode took, dumped and compared: `state`'s table replaced by one
        with those that differ; a record equal to its start again is the shared one again."""
        key_of = self.base.tables[name]
        held, start = state[key_of], self.base.start[key_of]
        shared = self.base.database.__dict__[name]
        changed: dict[Any, Any] = {}
        gone: list[Any] = []
        for key in list(table.taken):
            if not dict.__contains__(table, key):
                if key in held:
                    gone.append(key)
                if key not in start:
                    table.taken.discard(key)
                continue
            dumped = to_jsonable_python(dict.__getitem__(table, key), by_alias=True)
            if key in start and dumped == start[key]:  # the start's again: share it
                dict.__setitem__(table, key, shared[key])
                table.taken.discard(key)
                dumped = start[key]
            if held.get(key) != dumped or key not in held:
                changed[key] = dumped
        if changed or gone:
            new = {key: value for key, value in held.items() if key not in gone}
            new.update(changed)
            state[key_of] = new


def _restore(record: Any, pristine: Any) -> None:
    """Put a changed shared record back as it was, in place."""
    again = copy.deepcopy(pristine)
    if isinstance(record, BaseModel):
        record.__setstate__(again.__getstate__())
    elif isinstance(record, dict):
        record.clear()
        record.update(again)
    elif isinstance(record, list):
        record[:] = again

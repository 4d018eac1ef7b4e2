"""The tasks a run played, as the results store keeps them (its `tasks` table): each task's
content hash, level, tags and spec, written by the run, so that a stored run is compared, gated
and reported from the store alone. Task files are read again only to regrade with their
current checks, or for a run stored before the store kept its tasks."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from harness.secrets import redact
from harness.specs.located import Location, SpecError
from harness.specs.task import Provenance, Task
from harness.state_diff import canonical_state, state_digest

if TYPE_CHECKING:
    from harness.sim.suite import TaskCase
    from harness.store import Store
    from harness.store.database import Database, Row
    from harness.store.rows import RunInfo


class Labels(Protocol):
    """What gates, comparisons and summaries group a task's episodes by (a `Task` has them)."""

    @property
    def id(self) -> str: ...

    @property
    def level(self) -> int: ...

    @property
    def tags(self) -> Sequence[str]: ...


class PlayedTask(Protocol):
    """A task a run played, as a gate or a comparison reads it: a `TaskCase` loaded from its
    file, or a `StoredTask` read from the store."""

    @property
    def task(self) -> Labels: ...


@dataclass(frozen=True)
class TaskLabels:
    """A stored task's id, level and tags."""

    id: str
    level: int
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class StoredTask:
    """A task as a run played it: its labels (read as a `TaskCase`'s `task` is), its content
    hash ('' when unknown), its spec as JSON (the start state resolved) and its file."""

    task: TaskLabels
    content_hash: str = ""
    spec: dict[str, Any] = field(default_factory=dict)
    file: str = ""
    # the start state, kept in the store's `states` table once (the spec refers to it)
    start: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, case: TaskCase, content_hash: str = "") -> StoredTask:
        task = case.task
        labels = TaskLabels(task.id, task.level, tuple(task.tags))
        spec = task.model_dump(mode="json", exclude={"start": {"state"}})
        spec["start"]["state"] = case.state  # shared, never changed: not dumped per task
        return cls(labels, content_hash, spec, str(case.loaded.path), case.state)

    @property
    def title(self) -> str:
        return str(self.spec.get("title", ""))

    @property
    def state(self) -> dict[str, Any]:
        """The start state the task was played from."""
        return dict((self.spec.get("start") or {}).get("state") or {})

    @property
    def provenance(self) -> Provenance | None:
        """Where a task made from production traces came from; None for any other."""
        source = self.spec.get("source")
        return Provenance.model_validate(source) if source else None

    def spec_model(self) -> Task:
        """The task spec, validated (for what needs the whole task: the relative judge). A spec
        this harness cannot read (a check kind no plug-in here registers) is bad input."""
        try:
            return Task.model_validate(self.spec)
        except ValidationError as exc:
            first = str(exc).splitlines()[0]
            message = f"task {self.task.id!r} as the run stored it cannot be read here: {first}"
            raise SpecError.at(Location(self.file), "", message) from None


def task_records(cases: Sequence[TaskCase], hashes: Mapping[str, str]) -> list[StoredTask]:
    """Loaded tasks as the store keeps them, each with its content hash from `hashes`."""
    return [StoredTask.of(case, hashes.get(case.task.id, "")) for case in cases]


def full_task(played: PlayedTask) -> Task:
    """The whole task spec of a played task, loaded or stored."""
    if isinstance(played, StoredTask):
        return played.spec_model()
    task = played.task
    assert isinstance(task, Task)  # a TaskCase's
    return task


def played_tasks(store: Store, info: RunInfo) -> Sequence[PlayedTask]:
    """The tasks a stored run played, with the level, tags and spec it played them with, as
    the store recorded them; for a run stored before the store kept its tasks, loaded again
    from its task files as its recorded selection loads them (an error when they no longer
    load)."""
    from harness.sim.taskset import LoadTasksParams, load_task_set

    recorded = store.run_tasks(info.id)
    if recorded:
        return recorded
    return load_task_set(LoadTasksParams.model_validate(info.config["tasks"])).cases


def insert_tasks(db: Database, run_id: str, tasks: Sequence[StoredTask]) -> None:
    """Inside a write: record a run's tasks in order, and each start state once (`states`); a
    task it recorded before is kept."""
    starts = {state_digest(t.start): t.start for t in tasks if t.start is not None}
    for digest, state in starts.items():
        if db.execute("SELECT 1 FROM states WHERE hash = ?", (digest,)).fetchone() is not None:
            continue  # stored by an earlier run: not masked again (a real database takes a while)
        db.execute(
            "INSERT INTO states (hash, state) VALUES (?, ?) ON CONFLICT (hash) DO NOTHING",
            (digest, redact(canonical_state(state))),
        )
    for position, stored in enumerate(tasks):
        task, spec = stored.task, stored.spec
        if stored.start is not None:  # the state by reference
            reference = {STATE: state_digest(stored.start)}
            spec = {**spec, "start": {**spec.get("start", {}), "state": reference}}
        db.execute(
            "INSERT INTO tasks (run_id, task_id, position, content_hash, level, tags, spec, file)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, task_id) DO NOTHING",
            (
                run_id,
                task.id,
                position,
                stored.content_hash,
                task.level,
                json.dumps(list(task.tags)),
                redact(json.dumps(spec, sort_keys=True)),
                stored.file,
            ),
        )


def copy_tasks(db: Database, run_id: str, new: str) -> None:
    """Inside a write: give run `new` the tasks run `run_id` recorded."""
    db.execute(
        "INSERT INTO tasks (run_id, task_id, position, content_hash, level, tags, spec, file)"
        " SELECT ?, task_id, position, content_hash, level, tags, spec, file FROM tasks"
        " WHERE run_id = ?",
        (new, run_id),
    )


def stored_task(row: Row, states: Callable[[str], dict[str, Any]]) -> StoredTask:
    """A task row, its start state read through `states` (digest -> state) when it refers to
    one (a task stored before keeps its state whole)."""
    labels = TaskLabels(row["task_id"], row["level"], tuple(json.loads(row["tags"])))
    spec = json.loads(row["spec"])
    start = spec.get("start") or {}
    digest = state_ref(start.get("state"))
    if digest is not None:
        start["state"] = states(digest)
    return StoredTask(labels, row["content_hash"], spec, row["file"])


STATE = "$state"  # a reference to a state of the `states` table: {"$state": digest}


def state_ref(value: Any) -> str | None:
    """The digest a stored value refers to (`{"$state": digest}`), else None."""
    if isinstance(value, dict) and len(value) <= 2 and isinstance(value.get(STATE), str):
        return value[STATE]
    return None

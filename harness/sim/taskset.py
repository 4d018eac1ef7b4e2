"""A task set: task files and folders loaded with their personas and domains, filtered by id,
tag and level, sampled or limited, each task's content hashed (what a run records as its suite,
and what the gate compares with its baseline's)."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from harness.sim.suite import TaskCase, load_cases, suite_stamp
from harness.specs.base import Spec
from harness.specs.digest import canonical, file_digest, source_digest
from harness.specs.located import Location, SpecError, built_once
from harness.specs.overrides import Override
from harness.state_diff import canonical_state_bytes


@dataclass
class TaskSet:
    """Loaded, cross-checked tasks, and the content that identifies them."""

    cases: list[TaskCase]
    content_hash: str  # everything that defines the set
    task_hashes: dict[str, str] = field(default_factory=dict)  # each task's content hash
    source: dict[str, Any] = field(default_factory=dict)  # how they were loaded (the selection)

    @property
    def task_ids(self) -> list[str]:
        return [case.task.id for case in self.cases]


class LoadTasksParams(Spec):
    """Which tasks to run."""

    paths: list[str] = Field(min_length=1, description="Task files or folders.")
    ids: list[str] = Field(default_factory=list, description="Only these task ids.")
    tags: list[str] = Field(default_factory=list, description="Only tasks with one of these tags.")
    levels: list[int] = Field(default_factory=list, description="Only tasks of these levels.")
    sample: int | None = Field(
        default=None, ge=1, description="After the filters: a random sample of this many tasks."
    )
    seed: int = Field(default=0, description="Seed of `sample`: the same seed, the same tasks.")
    limit: int | None = Field(
        default=None, ge=1, description="Last: at most this many tasks, in file order."
    )
    personas: str | None = Field(default=None, description="Personas folder (default: nearest).")
    overrides: list[str] = Field(
        default_factory=list, alias="set", description="Task overrides, `PATH=VALUE`."
    )
    persona_overrides: list[str] = Field(
        default_factory=list, alias="persona_set", description="Persona overrides, `PATH=VALUE`."
    )


def task_parts(case: TaskCase) -> list[bytes]:
    """Everything that defines one task, as the pieces of one canonical JSON text: its spec,
    persona, start state, every file a check references (checker code), and the code of its
    domain (editing a tool must re-run the episodes, not reuse verdicts of the old tool).

    The start state (often megabytes, shared by many tasks) is written out once per state, not
    per task, and not joined into a text per task: its encoded canonical text stands between
    the pieces where it occurs (in the task's `start` and on its own), so that the pieces
    together are the very text `canonical` gives for the whole."""
    files = [file for c in case.task.checks for file in c.references().files.values()]
    task = case.task.model_dump(mode="json", exclude={"start": {"state"}})
    task["start"]["state"] = _STATE
    text = canonical(
        [
            task,
            *(p.model_dump(mode="json") for p in case.personas),
            _STATE,
            [file_digest(f) for f in files],
            source_digest(case.domain),
        ]
    )
    state = canonical_state_bytes(case.state)
    parts: list[bytes] = []
    for n, piece in enumerate(text.split(_STATE_TEXT)):
        parts += [state, piece.encode()] if n else [piece.encode()]
    return parts


def task_content(case: TaskCase) -> str:
    """`task_parts` as one text."""
    return b"".join(task_parts(case)).decode()


_STATE = "\x00start state\x00"
_STATE_TEXT = canonical(_STATE)


def content_hash(cases: list[TaskCase]) -> str:
    """Everything that defines a task set (`task_parts` of each task, in order)."""
    return _hashes(cases)[0]


def _hashes(cases: list[TaskCase]) -> tuple[str, dict[str, str]]:
    """The task set's content hash, and each task's (16 hex digits)."""
    suite = hashlib.sha256()
    tasks = {}
    for case in cases:
        own = hashlib.sha256()
        for part in task_parts(case):
            suite.update(part)
            own.update(part)
        tasks[case.task.id] = own.hexdigest()[:16]
    return suite.hexdigest(), tasks


def select(cases: list[TaskCase], params: LoadTasksParams, where: str) -> list[TaskCase]:
    unknown = set(params.ids) - {c.task.id for c in cases}
    if unknown:
        raise SpecError.at(
            Location(where), "ids", f"unknown task ids: {', '.join(sorted(unknown))}"
        )
    chosen = [
        c
        for c in cases
        if (not params.ids or c.task.id in params.ids)
        and (not params.tags or set(params.tags) & set(c.task.tags))
        and (not params.levels or c.task.level in params.levels)
    ]
    if not chosen:
        raise SpecError.at(Location(where), "", "no task matches the ids, tags and levels given")
    if params.sample is not None and params.sample < len(chosen):
        kept = set(random.Random(params.seed).sample(range(len(chosen)), params.sample))
        chosen = [case for index, case in enumerate(chosen) if index in kept]
    return chosen[: params.limit]


def load_task_set(params: LoadTasksParams, where: str = "load_tasks") -> TaskSet:
    """The task set the parameters describe (also used to re-grade a stored run); within one
    command, built once while its files are unchanged (planning, the preflight check and the
    node itself ask for it)."""
    paths = [Path(p) for p in params.paths]
    return built_once(
        ("tasks", params.model_dump_json()),
        lambda: suite_stamp(paths, Path(params.personas) if params.personas else None),
        lambda: _task_set(params, where),
    )


def _task_set(params: LoadTasksParams, where: str) -> TaskSet:
    cases = load_cases(
        [Path(p) for p in params.paths],
        Path(params.personas) if params.personas else None,
        [Override.parse_in(o, "task") for o in params.overrides],
        [Override.parse_in(o, "persona") for o in params.persona_overrides],
    )
    chosen = select(cases, params, where)
    suite, tasks = _hashes(chosen)
    return TaskSet(
        cases=chosen,
        content_hash=suite,
        task_hashes=tasks,
        source=params.model_dump(mode="json", by_alias=True),
    )

"""A suite: task files and folders loaded once with their personas and domains, selected by id,
tag and level, each task's content hashed."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any, TypeAlias

from harness.options import SelectionOptions, checked, override_list, overrides_of, refused
from harness.sim.taskset import LoadTasksParams, TaskSet, load_task_set
from harness.specs.references import check_paths


class Suite(TaskSet):
    """The tasks an evaluation plays (`cases`: each task with its persona, domain and start
    state), and the content that identifies them."""

    def __len__(self) -> int:
        return len(self.cases)

    def _repr_html_(self) -> str:
        levels = Counter(case.task.level for case in self.cases)
        tags = Counter(tag for case in self.cases for tag in case.task.tags)
        shown = ", ".join(f"level {level}: {n}" for level, n in sorted(levels.items()))
        top = ", ".join(f"{escape(tag)} ({n})" for tag, n in tags.most_common(8))
        return (
            f"<b>suite of {len(self)} tasks</b> <code>{self.content_hash[:16]}</code><br>"
            f"{shown}<br>tags: {top or '(none)'}"
        )


TaskPaths: TypeAlias = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
"""Task files and folders: one path, or a list of them."""

PATHS = "task files or folders (a path, or a list of paths)"


def load_suite(
    paths: TaskPaths,
    personas: str | os.PathLike[str] | None = None,
    *,
    ids: Sequence[str] = (),
    tags: Sequence[str] = (),
    levels: Sequence[int] = (),
    sample: int | None = None,
    seed: int = 0,
    limit: int | None = None,
    overrides: Sequence[str] = (),
    persona_set: Sequence[str] = (),
    set: Sequence[str] = (),  # the older name of `overrides`, kept for existing calls
) -> Suite:
    """Load task files and folders (personas from `personas`, else the nearest folder), keep
    the tasks with one of `ids`, `tags` and `levels` (each when given), then a random `sample`
    (by `seed`), then the first `limit`; `overrides` (or its older name `set`) and
    `persona_set` are `PATH=VALUE` overrides of every task and persona. The selection is
    checked by `SelectionOptions` (`sample` and `limit` 1 or more, `seed` 0 or more):
    `BadOptions` names a bad one."""
    checked(
        SelectionOptions, "load_suite", ids=list(ids), tags=list(tags), levels=list(levels),
        sample=sample, seed=seed, limit=limit,
    )  # fmt: skip
    listed = task_paths(paths, "load_suite", "paths")
    given = overrides_of("load_suite", overrides, set)
    check_paths([Path(p) for p in listed])
    params = LoadTasksParams.model_validate(
        {
            "paths": [os.fspath(p) for p in listed],
            "ids": list(ids),
            "tags": list(tags),
            "levels": list(levels),
            "sample": sample,
            "seed": seed,
            "limit": limit,
            "personas": os.fspath(personas) if personas is not None else None,
            "set": given,
            "persona_set": override_list("load_suite", "persona_set", persona_set),
        }
    )
    found = load_task_set(params, "load_suite")
    return Suite(found.cases, found.content_hash, found.task_hashes, found.source)


def as_suite(suite: Suite | TaskPaths, where: str) -> Suite:
    """A `Suite` as given, or loaded from task paths (`load_suite` with no selection);
    anything else is `BadOptions` (and a `TypeError`) naming `where`'s argument `suite`."""
    if isinstance(suite, Suite):
        return suite
    task_paths(suite, where, "suite", "a Suite (harness.load_suite) or " + PATHS)
    return load_suite(suite)


def task_paths(value: Any, where: str, name: str, expected: str = PATHS) -> list[Any]:
    """`value` as a list of paths, or `BadOptions` naming argument `name` of `where`."""
    if isinstance(value, str | os.PathLike):
        return [value]
    is_list = isinstance(value, Sequence) and not isinstance(value, bytes)
    if is_list and value and all(isinstance(item, str | os.PathLike) for item in value):
        return list(value)
    raise refused(where, name, expected, value)

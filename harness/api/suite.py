"""A suite: task files and folders loaded once with their personas and domains, selected by id,
tag and level, each task's content hashed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from html import escape
from pathlib import Path

from harness.options import SelectionOptions, checked
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


def load_suite(
    paths: str | Path | Sequence[str | Path],
    personas: str | Path | None = None,
    *,
    ids: Sequence[str] = (),
    tags: Sequence[str] = (),
    levels: Sequence[int] = (),
    sample: int | None = None,
    seed: int = 0,
    limit: int | None = None,
    set: Sequence[str] = (),
    persona_set: Sequence[str] = (),
) -> Suite:
    """Load task files and folders (personas from `personas`, else the nearest folder), keep
    the tasks with one of `ids`, `tags` and `levels` (each when given), then a random `sample`
    (by `seed`), then the first `limit`; `set` and `persona_set` are `PATH=VALUE` overrides.
    The selection is checked by `SelectionOptions` (`sample` and `limit` 1 or more, `seed` 0 or
    more): `BadOptions` names a bad one."""
    checked(
        SelectionOptions, "load_suite", ids=list(ids), tags=list(tags), levels=list(levels),
        sample=sample, seed=seed, limit=limit,
    )  # fmt: skip
    listed = [paths] if isinstance(paths, str | Path) else list(paths)
    check_paths([Path(p) for p in listed])
    params = LoadTasksParams.model_validate(
        {
            "paths": [str(p) for p in listed],
            "ids": list(ids),
            "tags": list(tags),
            "levels": list(levels),
            "sample": sample,
            "seed": seed,
            "limit": limit,
            "personas": str(personas) if personas is not None else None,
            "set": list(set),
            "persona_set": list(persona_set),
        }
    )
    found = load_task_set(params, "load_suite")
    return Suite(found.cases, found.content_hash, found.task_hashes, found.source)

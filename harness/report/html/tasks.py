"""The tasks a stored run played: their levels, tags, start states and provenance, as the store
recorded them when the run played them. A run stored before the store kept its tasks has them
read again from the files it recorded; a report is often made later or elsewhere (a CI
artifact), where those files may have moved: then it says why and shows what the store holds."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.sim.suite import load_cases
from harness.specs.overrides import Override
from harness.store import RunInfo, Store, StoredTask


@dataclass
class RunTasks:
    """A run's tasks by id, or why they could not be read (a plain record: a task's checks
    are typed only once their kinds are registered, so no model validates it again)."""

    cases: dict[str, StoredTask] = field(default_factory=dict)  # task id -> task
    problem: str = ""  # why the task files could not be read


def recorded_tasks(store: Store, run_id: str) -> RunTasks | None:
    """The tasks the store recorded for a run; None for a run stored before it kept them."""
    recorded = store.run_tasks(run_id)
    return RunTasks(cases={t.task.id: t for t in recorded}) if recorded else None


def run_tasks(info: RunInfo) -> RunTasks:
    """Load the task files a run recorded, with its task and persona overrides (for a run
    stored before the store kept its tasks)."""
    recorded = info.config.get("tasks")
    if not isinstance(recorded, dict) or not recorded.get("paths"):
        return RunTasks(problem="the run recorded no task files")
    paths = [Path(p) for p in recorded["paths"]]
    personas = recorded.get("personas")
    try:
        cases = load_cases(
            paths,
            Path(personas) if personas else None,
            [Override.parse_in(o, "task") for o in recorded.get("set") or []],
            [Override.parse_in(o, "persona") for o in recorded.get("persona_set") or []],
        )
    except Exception as exc:  # moved, edited or unloadable files: the report goes on without
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        where = ", ".join(map(str, paths))
        return RunTasks(problem=f"task files {where} could not be read: {first}")
    return RunTasks(cases={case.task.id: StoredTask.of(case) for case in cases})

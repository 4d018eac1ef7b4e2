"""A task's start state resolved: its state file, snapshot and inline state merged, validated
against the domain's `State` model (defaults applied), and written back as the task's whole
`start.state`, so that everything that reads or hashes a task sees one start state however it
was written."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from harness.domains import Environment
from harness.sim.env import initial_state
from harness.sim.stamps import files_stamp
from harness.specs.load import Loaded
from harness.specs.located import Positions, Problem, SpecError, built_once, under
from harness.specs.references import json_positions
from harness.specs.task import Task
from harness.specs.validation import validate


def start_state(
    loaded: Loaded[Task], domain: type[Environment], states: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The merged start state, validated against the domain's state model. Tasks that start
    from the same files and inline state share one, within a command (validated once; never
    changed: an environment copies the state it is given)."""
    start = loaded.spec.start
    key = json.dumps(
        [id(domain), start.state_file, start.state_db, start.state],
        sort_keys=True,
        default=str,
    )
    if key in states:
        return states[key]
    files = [Path(f) for f in (start.state_file, start.state_db) if f]
    states[key] = state = built_once(  # and once per command, for `validate` of file by file
        ("start-state", key),
        lambda: files_stamp([f for f in files if f.exists()]),
        lambda: _merged_state(loaded, domain),
    )
    return state


def starting_from(loaded: Loaded[Task], state: dict[str, Any]) -> Loaded[Task]:
    """The task with its resolved start state as its whole `start.state` (no files left to
    merge), so that a task that writes a default and one that leaves it out are one task."""
    task = loaded.spec
    start = task.start.model_copy(update={"state": state, "state_file": None, "state_db": None})
    return Loaded(task.model_copy(update={"start": start}), loaded.path, loaded.positions)


def _merged_state(loaded: Loaded[Task], domain: type[Environment]) -> dict[str, Any]:
    """The merged start state; for a domain with a `State` model, the validated model's JSON
    dump: defaults applied, so a tool may read every field the model declares (a domain
    without one keeps the merged data as it is)."""
    try:
        state = initial_state(loaded.spec, shared=domain.State is not None)  # validated: a copy
    except sqlite3.DatabaseError as exc:
        problem = loaded.problem(("start", "state_db"), f"unreadable snapshot: {exc}")
        raise SpecError([problem]) from None
    if domain.State is None:
        return state
    start = loaded.spec.start
    source = Path(start.state_file) if start.state_file else loaded.path
    try:
        model = validate(domain.State, state, _state_positions(loaded), source)
    except SpecError as exc:
        raise SpecError(
            [
                Problem(p.location, f"start.state.{p.path}".rstrip("."), p.message)
                for p in exc.problems
            ]
        ) from None
    return model.model_dump(mode="json", by_alias=True)  # by alias: it validates again as is


def _state_positions(loaded: Loaded[Task]) -> Positions:
    """Where each value of the merged start state was written, found only for a problem: the
    task's inline `start.state` over its JSON state file (its line and column, not its start).
    With a snapshot (`state_db`) between them, a value not written inline may be the
    snapshot's, so the state file's positions are not used."""
    inline = under(loaded.positions, ("start", "state"))
    start = loaded.spec.start
    if not start.state_file or start.state_db:
        return inline
    in_file = json_positions(Path(start.state_file))
    return Positions(lambda: {**in_file, **inline})

"""Load a spec file of each kind: read it, resolve its references, apply `--set` overrides, and
validate it, every problem located at the line (or override) that caused it."""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from harness.specs.agent import AgentVariant
from harness.specs.climb import Climb
from harness.specs.kinds import KINDS, expect_kind, kind_of, read_mapping
from harness.specs.located import (
    Location,
    PathKey,
    Problem,
    display,
    format_path,
    nearest,
    read_yaml,
)
from harness.specs.overrides import Override, apply_overrides
from harness.specs.persona import Persona
from harness.specs.references import read_extends, read_json, resolve_file
from harness.specs.script import Script
from harness.specs.task import Task
from harness.specs.validation import validate

M = TypeVar("M", bound=BaseModel)

# Files an agent variant names, resolved against the file of the chain that names them.
AGENT_FILES: tuple[PathKey, ...] = (("model", "script"), ("extends",), ("entry",))


@dataclass
class Loaded(Generic[M]):
    """A validated spec with the positions of its values, for cross-reference errors later."""

    spec: M
    path: Path
    positions: MutableMapping[PathKey, Location] = field(default_factory=dict)

    def where(self, *keys: str | int) -> Location:
        """The location of a value, or of its nearest written parent."""
        return nearest(self.positions, keys, Location(display(self.path), 1, 1))

    def problem(self, keys: PathKey, message: str) -> Problem:
        return Problem(self.where(*keys), format_path(keys), message)


def load_spec(path: Path, overrides: list[Override] | None = None) -> Loaded[BaseModel]:
    """Load any spec file, choosing the model from its `kind:`."""
    data, positions = read_mapping(path)
    kind = kind_of(path, data, positions)
    loaders: dict[str, Callable[[Path, list[Override] | None], Loaded[Any]]] = {
        "agent": load_agent,
        "task": load_task,
        "script": load_script,
        "climb": load_climb,
        "persona": load_persona,
    }
    loader = loaders.get(kind)
    if loader is not None:
        return loader(path, overrides)
    data = apply_overrides(data, overrides or [], positions)
    return Loaded(validate(KINDS[kind], data, positions, path), path, positions)


def load_agent(path: Path, overrides: list[Override] | None = None) -> Loaded[AgentVariant]:
    """Load an agent variant, resolving its `extends:` chain (child values win)."""
    merged, positions = read_extends(path, "agent", AGENT_FILES)
    merged = apply_overrides(merged, overrides or [], positions)
    return Loaded(validate(AgentVariant, merged, positions, path), path, positions)


def load_task(path: Path, overrides: list[Override] | None = None) -> Loaded[Task]:
    """Load a task; files it names (its domain's module, start state, checker code, a scripted
    judge's rules) are resolved against it, and a state file must be JSON."""
    data, positions = read_mapping(path)
    expect_kind(path, data, positions, "task")
    data = apply_overrides(data, overrides or [], positions)
    raw_checks = data.get("checks")
    checks = raw_checks if isinstance(raw_checks, list) else []
    file_keys: list[PathKey] = [("domain",), ("start", "state_file"), ("start", "state_db")]
    file_keys.append(("persona", "model", "script"))  # an inline persona's
    for i, check in enumerate(checks):
        if isinstance(check, dict):  # checker code, and a judge's rules file
            file_keys += [("checks", i, "file"), ("checks", i, "model", "script")]
    for keys in file_keys:
        resolve_file(path, data, keys, positions)
    task = validate(Task, data, positions, path)
    if task.start.state_file:
        read_json(Path(task.start.state_file), copy=False)  # read (and checked) once a command
    return Loaded(task, path, positions)


def load_script(path: Path, overrides: list[Override] | None = None) -> Loaded[Script]:
    """Load the rules file of a `scripted` model."""
    data, positions = read_mapping(path)
    expect_kind(path, data, positions, "script")
    data = apply_overrides(data, overrides or [], positions)
    return Loaded(validate(Script, data, positions, path), path, positions)


CLIMB_FILES: tuple[PathKey, ...] = (
    ("production",),
    ("gate",),
    ("reflection_model", "script"),
    ("judge_model", "script"),
)


def load_climb(path: Path, overrides: list[Override] | None = None) -> Loaded[Climb]:
    """Load a climb; the files it names are resolved against it (task folders, when used)."""
    data, positions = read_mapping(path)
    expect_kind(path, data, positions, "climb")
    data = apply_overrides(data, overrides or [], positions)
    for keys in CLIMB_FILES:
        resolve_file(path, data, keys, positions)
    return Loaded(validate(Climb, data, positions, path), path, positions)


def load_persona(path: Path, overrides: list[Override] | None = None) -> Loaded[Persona]:
    """Load a persona file; a scripted model's rules file is resolved against it."""
    data, positions = read_mapping(path)
    expect_kind(path, data, positions, "persona")
    data = apply_overrides(data, overrides or [], positions)
    resolve_file(path, data, ("model", "script"), positions)
    return Loaded(validate(Persona, data, positions, path), path, positions)


def variant_lineage(agent: Path, name: str) -> list[str]:
    """The variant's name and the names of the variant files it extends, nearest first: the
    gate takes a candidate of its baseline's lineage."""
    names, seen = [name], set()
    path: Path | None = agent.resolve()
    while path is not None and path not in seen and path.is_file():
        seen.add(path)
        data = read_yaml(path)[0] or {}  # read once per command: loading the agent read it
        if isinstance(data.get("name"), str) and data["name"] not in names:
            names.append(data["name"])
        parent = data.get("extends")
        path = (path.parent / parent).resolve() if isinstance(parent, str) else None
    return names

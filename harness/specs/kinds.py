"""The kinds of spec file, and reading a file as a mapping whose `kind:` is one of them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from harness.specs.agent import AgentVariant
from harness.specs.climb import Climb
from harness.specs.dag import Dag
from harness.specs.gate import Gate
from harness.specs.located import Location, PathKey, Positions, SpecError, display, read_yaml
from harness.specs.persona import Persona
from harness.specs.script import Script
from harness.specs.task import Task

KINDS: dict[str, type[BaseModel]] = {
    "task": Task,
    "persona": Persona,
    "agent": AgentVariant,
    "dag": Dag,
    "gate": Gate,
    "script": Script,
    "climb": Climb,
}


def read_mapping(path: Path) -> tuple[dict[str, Any], Positions]:
    """Read a YAML file that must hold a mapping."""
    data, positions = read_yaml(path)
    if not isinstance(data, dict):
        found = "an empty file" if data is None else f"a {type(data).__name__}"
        kinds = ", ".join(KINDS)
        raise SpecError.at(
            Location(display(path), 1, 1),
            "",
            f"expected a mapping with 'kind: {{{kinds}}}', found {found}",
        )
    return data, positions


def kind_of(path: Path, data: dict[str, Any], positions: Mapping[PathKey, Location]) -> str:
    """The file's `kind:`, checked against the known kinds."""
    kind = data.get("kind")
    if kind not in KINDS:
        where = positions.get(("kind",), Location(display(path), 1, 1))
        expected = ", ".join(KINDS)
        found = "missing" if kind is None else f"'{kind}' is unknown"
        raise SpecError.at(where, "kind", f"{found}; expected one of: {expected}")
    return kind


def expect_kind(
    path: Path, data: dict[str, Any], positions: Mapping[PathKey, Location], kind: str
) -> None:
    """Refuse a file of another kind than the one a loader reads."""
    found = kind_of(path, data, positions)
    if found != kind:
        where = positions.get(("kind",), Location(display(path), 1, 1))
        raise SpecError.at(where, "kind", f"expected a '{kind}' file, found '{found}'")

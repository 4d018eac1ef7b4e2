"""Check one spec file the way it will be used: a task with its personas and domain, a DAG
planned (node kinds, parameters, wiring, referenced files), any other kind validated."""

from __future__ import annotations

from pathlib import Path

from harness.pipeline.dag import plan
from harness.sim.suite import load_suite
from harness.specs.kinds import kind_of, read_mapping
from harness.specs.load import load_spec


def check_file(path: Path) -> str:
    """The file's kind when it is valid; a SpecError naming every problem otherwise."""
    data, positions = read_mapping(path)
    kind = kind_of(path, data, positions)
    if kind == "task":
        load_suite([path])
    elif kind == "dag":
        plan(load_spec(path))
    else:
        load_spec(path)
    return kind

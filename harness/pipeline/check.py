"""Check one spec file the way it will be used: a task with its personas and domain, a DAG
planned (node kinds, parameters, wiring, referenced files) and preflighted (each agent against
its tasks), an agent with what it names (its provider, its entry), a persona with its model's
provider, any other kind validated."""

from __future__ import annotations

from pathlib import Path

from harness.pipeline.runner import preflight, prepare
from harness.sim.agent import check_agent
from harness.sim.personas import check_persona
from harness.sim.suite import load_cases
from harness.specs.kinds import kind_of, read_mapping
from harness.specs.load import load_agent, load_persona, load_spec


def check_file(path: Path) -> str:
    """The file's kind when it is valid; a SpecError naming every problem otherwise."""
    data, positions = read_mapping(path)
    kind = kind_of(path, data, positions)
    if kind == "task":
        load_cases([path])
    elif kind == "dag":
        preflight(prepare(data, positions, path))
    elif kind == "agent":
        check_agent(load_agent(path))
    elif kind == "persona":
        check_persona(load_persona(path))
    else:
        load_spec(path)
    return kind

"""An agent variant, loaded once: its file resolved through `extends:`, overrides applied,
validated and checked (its provider, its python entry) before anything runs."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.options import overrides_of, refused
from harness.sim.agent import check_agent
from harness.specs.agent import AgentVariant
from harness.specs.load import Loaded, variant_lineage
from harness.specs.load import load_agent as load_agent_file
from harness.specs.overrides import Override


@dataclass(frozen=True)
class Agent:
    """A loaded agent variant and where it came from."""

    loaded: Loaded[AgentVariant]
    path: Path
    overrides: tuple[str, ...] = ()

    @property
    def variant(self) -> AgentVariant:
        return self.loaded.spec

    @property
    def name(self) -> str:
        return self.variant.name

    @property
    def content_hash(self) -> str:
        """The same bytes in simulation and production: what a run records for the agent."""
        return self.variant.content_hash()

    def lineage(self) -> list[str]:
        """The variant's name and the names of the variant files it extends, nearest first."""
        return variant_lineage(self.path, self.name)

    def _repr_html_(self) -> str:
        model = self.variant.model.id if self.variant.model is not None else "(none)"
        return (
            f"<b>agent {self.name}</b> hash <code>{self.content_hash[:16]}</code>, "
            f"model <code>{model}</code>, {len(self.variant.tools)} tools"
        )


def load_agent(
    path: str | os.PathLike[str],
    set: Sequence[str] = (),  # the older name of `overrides`, kept for existing calls
    *,
    overrides: Sequence[str] = (),
) -> Agent:
    """Load an agent variant file with `PATH=VALUE` overrides (as `--set agent.PATH=VALUE`),
    given as `overrides=` (or by their older name `set=`)."""
    if not isinstance(path, str | os.PathLike):
        raise refused("load_agent", "path", "an agent file (a path)", path)
    given = overrides_of("load_agent", overrides, set)
    parsed = [Override.parse_in(text, "agent") for text in given]
    loaded = check_agent(load_agent_file(Path(path), parsed))
    return Agent(loaded, Path(path), tuple(given))


def as_agent(agent: Agent | str | os.PathLike[str], where: str, name: str = "agent") -> Agent:
    """An `Agent` as given, or loaded from its file; anything else is `BadOptions` (and a
    `TypeError`) naming `where`'s argument `name`."""
    if isinstance(agent, Agent):
        return agent
    if isinstance(agent, str | os.PathLike):
        return load_agent(agent)
    raise refused(where, name, "an Agent (harness.load_agent) or an agent file (a path)", agent)

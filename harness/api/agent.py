"""An agent variant, loaded once: its file resolved through `extends:`, overrides applied,
validated and checked (its provider, its python entry) before anything runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

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


def load_agent(path: str | Path, set: Sequence[str] = ()) -> Agent:
    """Load an agent variant file with `PATH=VALUE` overrides (as `--set agent.PATH=VALUE`)."""
    overrides = [Override.parse_in(text, "agent") for text in set]
    loaded = check_agent(load_agent_file(Path(path), overrides))
    return Agent(loaded, Path(path), tuple(set))

"""Hill climbing: the `gepa` library proposes variants from failing transcripts (`search`); a
candidate ships only through the gate on held-out tasks (`accept`), as a variant file that
`extends` production (`output`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.climb.accept import Acceptance, accept
from harness.climb.output import write_accepted
from harness.climb.search import Progress, SearchResult, search
from harness.pipeline.runner import RunOptions
from harness.specs.climb import Climb
from harness.specs.load import Loaded, load_agent


@dataclass
class ClimbOutcome:
    """A finished climb: what the search found, the decision, and the file written."""

    search: SearchResult
    acceptance: Acceptance
    variant_file: Path | None


def run_climb(
    loaded: Loaded[Climb],
    options: RunOptions,
    climb_id: str = "",
    progress: Progress = lambda line: None,
) -> ClimbOutcome:
    """Search, accept through the gate, and write the accepted variant (if any)."""
    found = search(loaded, options, climb_id, progress)
    progress(f"search done: {found.candidates} candidates, {found.episodes} episodes")
    decision = accept(found)
    written = None
    if decision.accepted:
        context = found.context
        production = load_agent(context.production_file).spec
        written = write_accepted(
            context.base / context.config.out,
            context.production_file,
            f"{production.name}-{context.config.name}",
            found.best,
            found.lineage,
            decision.evidence,
            found.climb_id,
        )
    return ClimbOutcome(found, decision, written)


__all__ = ["ClimbOutcome", "run_climb"]

"""Hill climbing: the `gepa` library proposes variants from failing transcripts (`search`); a
candidate ships only through the gate on held-out tasks (`accept`), as a variant file that
`extends` production (`output`)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from harness.climb.accept import Acceptance, accept
from harness.climb.output import write_accepted
from harness.climb.publish import log_climb
from harness.climb.records import Progress
from harness.climb.search import SearchResult, search
from harness.climb.split import plural
from harness.pipeline.runner import RunOptions
from harness.pipeline.types import WandbRun
from harness.specs.climb import Climb
from harness.specs.load import Loaded


@dataclass
class ClimbOutcome:
    """A finished climb: what the search found, the decision, the file written and the W&B
    run it was logged to."""

    search: SearchResult
    acceptance: Acceptance
    variant_file: Path | None
    wandb: WandbRun | None = None


def run_climb(
    loaded: Loaded[Climb],
    options: RunOptions,
    climb_id: str = "",
    progress: Progress = lambda line: None,
) -> ClimbOutcome:
    """Search, accept through the gate, write the accepted variant (if any), and record the
    decision in the results store and W&B. The climb drives an event loop of its own: called
    where one is running already (a notebook), it runs on a thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        with ThreadPoolExecutor(max_workers=1) as thread:
            return thread.submit(run_climb, loaded, options, climb_id, progress).result()
    found = search(loaded, options, climb_id, progress)
    try:
        progress(f"search done: {plural(found.candidates, 'candidate')}, {found.episodes} episodes")
        decision = accept(found)
        written = None
        if decision.accepted:
            context = found.context
            written = write_accepted(
                context.base / context.config.out,
                context.production_file,
                f"{context.lineage[0]}-{context.config.name}",
                found.best,
                found.lineage,
                decision.evidence,
                found.climb_id,
            )
        wandb_run = record_decision(found, decision, written)
    finally:
        found.session.close()
    return ClimbOutcome(found, decision, written, wandb_run)


def record_decision(
    found: SearchResult, decision: Acceptance, written: Path | None
) -> WandbRun | None:
    """The decision in the store (with the best candidate marked) and in W&B."""
    store = found.recorder.store
    if found.best:
        best = found.lineage[-1]
        status = "shipped" if decision.accepted else "best, not shipped"
        store.set_candidate_status(found.climb_id, best, status, "; ".join(decision.reasons))
    summary = {
        "accepted": decision.accepted,
        "reasons": decision.reasons,
        "evidence": decision.evidence,
        "figures": decision.figures,
        "lineage": found.lineage,
        "production_run": decision.production_run,
        "candidate_run": decision.candidate_run,
        "variant_file": str(written) if written else None,
        "stopped_by": found.stopped_by,
        "episodes": found.episodes,
        "spent_usd": found.spent_usd + found.reflection_usd,
        "split": {
            "train": found.split.train,
            "validation": found.split.validation,
            "clusters": found.split.clusters,  # task made from production: its failure cluster
            "failure_clusters": len(set(found.split.clusters.values())),
        },
        "nothing_to_learn": found.nothing_to_learn,
    }
    store.finish_climb(found.climb_id, "shipped" if decision.accepted else "not shipped", summary)
    if found.context.config.wandb.resolved_mode() == "disabled":
        return None
    return log_climb(store, found.climb_id, found.context.config, decision)


__all__ = ["ClimbOutcome", "run_climb"]

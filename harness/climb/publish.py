"""A finished climb as a W&B run (offline by default, like the `log_wandb` node): one step per
evaluation, a table of every candidate with its parent and status, and the decision."""

from __future__ import annotations

import json
from typing import Any

from harness.climb.accept import Acceptance
from harness.pipeline.nodes.log_wandb import finished, start_wandb_run
from harness.pipeline.types import WandbRun
from harness.specs.climb import Climb
from harness.store import Store


def log_climb(store: Store, climb_id: str, config: Climb, decision: Acceptance) -> WandbRun:
    import wandb

    run = start_wandb_run(config.wandb, climb_id, "climb", config.model_dump(mode="json"))
    try:
        episodes, cost = 0, 0.0
        for step, evaluation in enumerate(store.climb_evaluations(climb_id)):
            episodes += evaluation.episodes
            cost += evaluation.cost_usd
            run.log(
                {
                    f"{evaluation.purpose}/mean_score": evaluation.mean,
                    "episodes": episodes,
                    "cost_usd": cost,
                    "candidate": evaluation.candidate,
                },
                step=step,
            )
        rows: list[list[Any]] = [
            [c.candidate, c.parent or "", c.status, c.note, json.dumps(c.changes), c.diff]
            for c in store.climb_candidates(climb_id)
        ]
        columns: list[str | int] = ["candidate", "parent", "status", "note", "changes", "diff"]
        run.log({"candidates": wandb.Table(columns=columns, data=rows)})
        summary: dict[str, Any] = {"accepted": int(decision.accepted), "candidates": len(rows)}
        summary |= {f"acceptance/{name}": value for name, value in decision.figures.items()}
        run.summary.update(summary)
    finally:
        outcome = finished(run)
    return outcome

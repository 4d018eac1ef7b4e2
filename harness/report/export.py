"""One row per stored episode, as JSON lines or CSV: the results in a form a spreadsheet or a
notebook reads, without the transcripts."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from typing import Literal, TextIO

from pydantic import BaseModel, Field

from harness.sim.episode import episode_seed
from harness.store import RunInfo, Store

ExportFormat = Literal["jsonl", "csv"]


class EpisodeExport(BaseModel):
    """One episode of a run with its newest verdict."""

    run_id: str = Field(description="The run in the results store.")
    task: str = Field(description="Task id.")
    trial: int = Field(description="Trial index.")
    seed: int = Field(description="Seed of every model call of the episode (`episode_seed`).")
    variant: str = Field(description="Agent variant name.")
    variant_hash: str = Field(description="Agent variant content hash.")
    verdict: str = Field(description="pass, fail, error, or ungraded.")
    score: float | None = Field(description="Weighted score of the checks; null if ungraded.")
    end_reason: str = Field(description="Why the episode ended.")
    error_side: str | None = Field(description="The side that failed, for an error verdict.")
    failed_checks: list[str] = Field(description="Gating checks that did not pass.")
    turns: int = Field(description="User turns the agent answered.")
    duration_s: float = Field(description="Wall time of the episode in seconds.")
    agent_input_tokens: int = Field(description="Prompt tokens of the agent's model calls.")
    agent_output_tokens: int = Field(description="Completion tokens of the agent's calls.")
    user_input_tokens: int = Field(description="Prompt tokens of the simulated user's calls.")
    user_output_tokens: int = Field(description="Completion tokens of the simulated user's calls.")
    judge_input_tokens: int = Field(default=0, description="Prompt tokens of the judges' calls.")
    judge_output_tokens: int = Field(
        default=0, description="Completion tokens of the judges' calls."
    )
    agent_cost_usd: float = Field(default=0.0, description="Cost of the agent's calls, US dollars.")
    user_cost_usd: float = Field(
        default=0.0, description="Cost of the simulated user's calls, US dollars."
    )
    judge_cost_usd: float = Field(
        default=0.0, description="Cost of the judges' calls grading the episode, US dollars."
    )
    cost_usd: float = Field(
        description="The episode's whole cost (agent, simulated user and judges), US dollars."
    )


def export_rows(store: Store, runs: Iterable[RunInfo]) -> Iterator[EpisodeExport]:
    """Each stored episode of the runs, by run, task and trial, read a page at a time."""
    for info in runs:
        for row in store.episode_rows(info.id):
            verdict, judged = row.verdict, row.judge_usage
            yield EpisodeExport(
                run_id=info.id,
                task=row.task_id,
                trial=row.trial,
                seed=episode_seed(row.task_id, row.trial),
                variant=info.variant,
                variant_hash=info.variant_hash,
                verdict=verdict.outcome if verdict else "ungraded",
                score=verdict.score if verdict else None,
                end_reason=row.end_reason,
                error_side=verdict.error_side.value if verdict and verdict.error_side else None,
                failed_checks=[c.name for c in verdict.failed_checks()] if verdict else [],
                turns=row.turns,
                duration_s=row.duration_s,
                agent_input_tokens=row.usage.input_tokens,
                agent_output_tokens=row.usage.output_tokens,
                user_input_tokens=row.user_usage.input_tokens,
                user_output_tokens=row.user_usage.output_tokens,
                judge_input_tokens=judged.input_tokens,
                judge_output_tokens=judged.output_tokens,
                agent_cost_usd=row.usage.cost_usd,
                user_cost_usd=row.user_usage.cost_usd,
                judge_cost_usd=judged.cost_usd,
                cost_usd=row.spend.cost_usd,
            )


def write_export(rows: Iterable[EpisodeExport], form: ExportFormat, out: TextIO) -> int:
    """Write the rows as JSON lines or as CSV with a header (failed checks joined by "; ");
    the number of rows written."""
    count = 0
    if form == "jsonl":
        for row in rows:
            out.write(json.dumps(row.model_dump(mode="json"), ensure_ascii=False) + "\n")
            count += 1
        return count
    writer = csv.DictWriter(out, fieldnames=list(EpisodeExport.model_fields), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        values = row.model_dump(mode="json")
        values["failed_checks"] = "; ".join(row.failed_checks)
        writer.writerow(values)
        count += 1
    return count

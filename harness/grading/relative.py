"""Relative grading: which of two transcripts of the same task, persona and trial is better.

The judge is asked twice with the positions swapped; a winner is declared only when both orders
agree, and any disagreement is a tie, which cancels the judge's position bias. The verdict carries
the usage of every judge call it made (`PairVerdict.usage`), for the caller to count.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from harness.grading.judge import JudgeError, Preference, ask, pairwise_prompt, task_domain
from harness.models import ChatModel
from harness.specs.task import Task
from harness.transcript import Transcript, Usage

Winner = Literal["a", "b", "tie"]


class PairVerdict(BaseModel):
    """The relative judge's decision on one task and trial."""

    task_id: str = Field(description="The task both transcripts played.")
    trial: int = Field(description="The trial (same seed on both sides).")
    winner: Winner | None = Field(description="a, b, tie; None when the judge failed.")
    a_first: str = Field(default="", description="Judgement with A shown first.")
    b_first: str = Field(default="", description="Judgement with B shown first.")
    error: str | None = Field(default=None, description="Why no judgement was made.")
    usage: Usage = Field(
        default_factory=Usage,
        description="Usage of the judge's calls for this pair: both orders, retries and "
        "unparseable replies included (also when the judge failed).",
    )


def _as_side(better: str, first: Winner) -> Winner:
    if better == "tie":
        return "tie"
    second: Winner = "b" if first == "a" else "a"
    return first if better == "1" else second


async def compare_pair(
    task: Task, a: Transcript, b: Transcript, judge: ChatModel, retries: int = 1
) -> PairVerdict:
    """Judge A against B in both orders; when the two judgements disagree, it is a tie."""
    if (a.task_id, a.trial) != (b.task_id, b.trial):
        raise ValueError(f"not a pair: {a.task_id}#{a.trial} vs {b.task_id}#{b.trial}")
    goal, domain = task.scenario.reason, task_domain(task)
    a_shown_first = pairwise_prompt(goal, a, b, domain)
    b_shown_first = pairwise_prompt(goal, b, a, domain)
    spent = Usage()
    try:
        a_first = await ask(judge, a_shown_first, Preference, retries, a.trial, spent)
        b_first = await ask(judge, b_shown_first, Preference, retries, a.trial, spent)
    except JudgeError as exc:
        return PairVerdict(
            task_id=a.task_id, trial=a.trial, winner=None, error=str(exc), usage=spent
        )
    first, second = _as_side(a_first.better, "a"), _as_side(b_first.better, "b")
    return PairVerdict(
        task_id=a.task_id,
        trial=a.trial,
        winner=first if first == second else "tie",
        a_first=a_first.reasoning,
        b_first=b_first.reasoning,
        usage=spent,
    )

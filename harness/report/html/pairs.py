"""The A/B section's episodes: the same task and trial (so the same seed) of both runs side by
side, the tasks that flipped first, since they are where the variants differ."""

from __future__ import annotations

from pydantic import BaseModel, Field

from harness.compare import ComparisonResult
from harness.report.html.episodes import EpisodeView


class EpisodePair(BaseModel):
    """One task and trial played by both variants."""

    task_id: str = Field(description="The task.")
    trial: int = Field(description="The trial (both sides played it with the same seed).")
    a: EpisodeView = Field(description="Variant A's episode.")
    b: EpisodeView = Field(description="Variant B's episode.")
    flip: str = Field(
        default="", description="'to fail' or 'to pass' when the task flipped, else empty."
    )

    @property
    def differs(self) -> bool:
        return self.a.outcome != self.b.outcome


def episode_pairs(
    a: list[EpisodeView], b: list[EpisodeView], comparison: ComparisonResult
) -> list[EpisodePair]:
    """Every (task, trial) both runs played: flipped tasks first (to fail, then to pass), then
    pairs whose outcomes differ, then the rest, each by task and trial."""
    flips = dict.fromkeys(comparison.flipped_to_fail, "to fail")
    flips.update(dict.fromkeys(comparison.flipped_to_pass, "to pass"))
    by_key = {(e.task_id, e.trial): e for e in b}
    pairs = [
        EpisodePair(task_id=e.task_id, trial=e.trial, a=e, b=other, flip=flips.get(e.task_id, ""))
        for e in a
        if (other := by_key.get((e.task_id, e.trial))) is not None
    ]
    rank = {"to fail": 0, "to pass": 1, "": 2}
    return sorted(pairs, key=lambda p: (rank[p.flip], not p.differs, p.task_id, p.trial))

"""Which episodes a page lists: by variant, task, tag, verdict and end reason, and text searched
in the transcripts. The viewer applies a filter on the server over every run; a report file
applies the same fields in the browser (`report.js`)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from harness.report.html.episodes import EpisodeView

FIELDS = ("variant", "task", "tag", "verdict", "end_reason", "q")


class EpisodeFilter(BaseModel):
    """A filter of episodes; an empty field matches everything."""

    variant: str = Field(default="", description="Only this agent variant.")
    task: str = Field(default="", description="Only this task id.")
    tag: str = Field(default="", description="Only tasks with this tag.")
    verdict: str = Field(default="", description="pass, fail, error or ungraded.")
    end_reason: str = Field(default="", description="Only episodes that ended this way.")
    q: str = Field(default="", description="Text the conversation contains (any case).")

    @classmethod
    def from_query(cls, query: dict[str, str]) -> EpisodeFilter:
        return cls(**{name: query.get(name, "").strip() for name in FIELDS})

    @property
    def active(self) -> bool:
        return any(getattr(self, name) for name in FIELDS)

    def matches(self, episode: EpisodeView) -> bool:
        return (
            (not self.variant or episode.variant == self.variant)
            and (not self.task or episode.task_id == self.task)
            and (not self.tag or self.tag in episode.tags)
            and (not self.verdict or episode.outcome == self.verdict)
            and (not self.end_reason or episode.end_reason == self.end_reason)
            and (not self.q or episode.matches_text(self.q.lower()))
        )


class Choices(BaseModel):
    """The values the filter form offers, taken from the episodes listed."""

    variants: list[str] = Field(description="Agent variants.")
    task_ids: list[str] = Field(description="Task ids.")
    tags: list[str] = Field(description="Task tags.")
    end_reason_names: list[str] = Field(description="End reasons.")

    @classmethod
    def of(cls, episodes: list[EpisodeView]) -> Choices:
        return cls(
            variants=sorted({e.variant for e in episodes}),
            task_ids=sorted({e.task_id for e in episodes}),
            tags=sorted({tag for e in episodes for tag in e.tags}),
            end_reason_names=sorted({e.end_reason for e in episodes}),
        )

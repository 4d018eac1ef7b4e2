"""Failure clusters from production traces: a task made by `harness traces to-tasks` stands for
a cluster of conversations (its `source`); the report shows each with how often production saw
it, and how this run's agent did on the task it became."""

from __future__ import annotations

from collections import defaultdict

from pydantic import BaseModel, Field

from harness.report.html.episodes import EpisodeView
from harness.secrets import redact
from harness.store import StoredTask


class ClusterView(BaseModel):
    """One production cluster and the run's episodes of its task."""

    task_id: str = Field(description="The generated task.")
    file: str = Field(description="The task file.")
    title: str = Field(description="The task's title.")
    kind: str = Field(description="failure or success.")
    signature: str = Field(description="What the clustered conversations share.")
    count: int = Field(description="Conversations (sessions) in the cluster.")
    traces: int = Field(description="Traces they spanned.")
    first_seen: str = Field(description="The first occurrence.")
    last_seen: str = Field(description="The last occurrence.")
    reasons: list[str] = Field(description="Why production's conversations failed.")
    passed: int = Field(description="This run's episodes of the task that passed.")
    episodes: list[str] = Field(description="Keys of this run's episodes of the task.")


def failure_clusters(
    cases: dict[str, StoredTask], episodes: list[EpisodeView]
) -> list[ClusterView]:
    """The clusters behind the run's tasks that carry provenance, the most frequent first."""
    played: dict[str, list[EpisodeView]] = defaultdict(list)
    for episode in episodes:
        played[episode.task_id].append(episode)
    clusters = []
    for task_id, mine in played.items():
        case = cases.get(task_id)
        source = case.provenance if case is not None else None
        if case is None or source is None:
            continue
        clusters.append(
            ClusterView(
                task_id=task_id,
                file=case.file,
                title=case.title,
                kind=source.kind,
                signature=redact(source.signature),
                count=source.count or source.traces,
                traces=source.traces,
                first_seen=source.first_seen,
                last_seen=source.last_seen,
                reasons=[redact(reason) for reason in source.reasons],
                passed=sum(e.outcome == "pass" for e in mine),
                episodes=[e.key for e in mine],
            )
        )
    return sorted(clusters, key=lambda c: (-c.count, c.task_id))

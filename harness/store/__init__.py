"""The results store: pipelines, runs, the tasks each run played, episodes (full transcripts),
verdicts and cached node outputs in one SQLite file (the default), or in a PostgreSQL database
that runners on several machines share (`--store postgresql://...`, `$HARNESS_STORE`); the same
methods, the same answers.

A *run* is one variant's episodes over a task set (the output of a `simulate` node) with their
verdicts; a *pipeline* is one execution of a DAG, which may hold several runs. Episodes and
verdicts are written as they finish, so a crash loses nothing already done and a large run is
never held in memory. Everything is redacted on the way in: an API key never reaches the file.
The digests the harness computed (a run's task hashes, a node output's) are stored as they are
(`rows.stored_json`): a mask would corrupt them, and they hold nothing of anyone's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import AbstractContextManager
from os import PathLike
from typing import Any

from harness.defaults import RESULTS_STORE
from harness.secrets import redact
from harness.store.climbs import CandidateInfo, ClimbInfo, ClimbRecords, EvaluationInfo
from harness.store.database import Database, open_database
from harness.store.decisions import DecisionRecords
from harness.store.episodes import EpisodeRecords
from harness.store.rows import (
    EpisodeRow,
    PipelineInfo,
    RunInfo,
    new_id,
    now,
    pipeline_info,
    stored_json,
)
from harness.store.runs import RunRecords
from harness.store.tasks import PlayedTask, StoredTask, TaskLabels
from harness.store_location import StoreLocation

__all__ = [
    "CandidateInfo",
    "ClimbInfo",
    "EpisodeRow",
    "EvaluationInfo",
    "PipelineInfo",
    "PlayedTask",
    "RunInfo",
    "Store",
    "StoreLocation",
    "StoredTask",
    "TaskLabels",
    "new_id",
]


class Store(RunRecords, EpisodeRecords, DecisionRecords, ClimbRecords):
    """A results store, shared safely by several processes: every write is one short
    transaction (`Database.write`: SQLite's `BEGIN IMMEDIATE`, retried while another process
    holds the lock), rows are read a page at a time (a read held open across a write would fail
    it), and writing the same episode or verdict twice keeps the first (a resumed or doubled run
    is a no-op, not a crash).

    Its methods are grouped by table: runs (`runs.RunRecords`), their tasks, episodes and
    verdicts (`episodes.EpisodeRecords`), baselines and what gates and reports decided
    (`decisions.DecisionRecords`), climbs (`climbs.ClimbRecords`); pipelines and cached node
    outputs are here."""

    def __init__(self, path: StoreLocation | str | PathLike[str] = RESULTS_STORE):
        self.path = StoreLocation.of(path)  # printed with a database URL's password masked
        self.db: Database = open_database(self.path)
        self._states: dict[str, dict[str, Any]] = {}  # digest -> a start state read or written
        # (run, task) -> the digest of the start state its episodes are stored against
        self._starts: dict[tuple[str, str], str] = {}

    def close(self) -> None:
        self.db.close()

    def pipeline_lock(self, pipeline_id: str) -> AbstractContextManager[None]:
        """Held while this process runs the pipeline; another process holding it is an error
        (bad input: a `--resume` of a pipeline still running)."""
        return self.db.pipeline_lock(pipeline_id)

    def run_lock(self, key: str) -> AbstractContextManager[None]:
        """Held while this process plays the run of a key; another process playing the same
        key waits for it, then plays only the episodes still missing (none twice)."""
        return self.db.work_lock(f"run {key}")

    # ------------------------------------------------------------ pipelines

    def new_pipeline(self, name: str, config: dict[str, Any], pipeline_id: str = "") -> str:
        """Record a pipeline execution (or, given an existing id, mark it running again)."""
        pipeline_id = pipeline_id or new_id("dag-")
        values = (pipeline_id, name, now(), "running", redact(json.dumps(config, sort_keys=True)))
        self.db.write(
            lambda db: db.execute(
                "INSERT INTO pipelines (id, name, created_at, status, config)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET status = 'running'",
                values,
            ),
        )
        return pipeline_id

    def finish_pipeline(self, pipeline_id: str, status: str, nodes: dict[str, Any]) -> None:
        values = (status, json.dumps(nodes), pipeline_id)
        self.db.write(
            lambda db: db.execute(
                "UPDATE pipelines SET status = ?, nodes = ? WHERE id = ?", values
            ),
        )

    def pipeline(self, pipeline_id: str) -> PipelineInfo | None:
        row = self.db.execute("SELECT * FROM pipelines WHERE id = ?", (pipeline_id,)).fetchone()
        return pipeline_info(row) if row else None

    def pipelines(self, limit: int = 50) -> list[PipelineInfo]:
        rows = self.db.execute(
            "SELECT * FROM pipelines ORDER BY created_at DESC, id DESC LIMIT ?", (limit,)
        )
        return [pipeline_info(row) for row in rows]

    def node_output(self, key: str) -> str | None:
        """The stored output of a finished node with this key (its cache entry)."""
        row = self.db.execute("SELECT output FROM node_outputs WHERE key = ?", (key,)).fetchone()
        return row["output"] if row else None

    def put_node_output(
        self, key: str, kind: str, output: Mapping[str, Any], pipeline_id: str
    ) -> None:
        """Store a finished node's output (its JSON data) as the cache entry of its key."""
        values = (key, kind, stored_json(output), pipeline_id, now())
        self.db.write(
            lambda db: db.execute(
                "INSERT INTO node_outputs (key, kind, output, pipeline_id, finished_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET kind = excluded.kind,"
                " output = excluded.output, pipeline_id = excluded.pipeline_id,"
                " finished_at = excluded.finished_at",
                values,
            ),
        )

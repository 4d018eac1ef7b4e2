"""The results store: pipelines, runs, episodes (full transcripts), verdicts and cached node
outputs in one SQLite file.

A *run* is one variant's episodes over a task set (the output of a `simulate` node) with their
verdicts; a *pipeline* is one execution of a DAG, which may hold several runs. Episodes and
verdicts are written as they finish, so a crash loses nothing already done and a large run is
never held in memory. Everything is redacted on the way in: an API key never reaches the file.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.defaults import RESULTS_STORE
from harness.grading.result import Verdict
from harness.secrets import redact
from harness.store.schema import open_results
from harness.transcript import Transcript, Usage


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_id(prefix: str = "") -> str:
    """A time-ordered unique id."""
    return prefix + datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


@dataclass
class RunInfo:
    """A stored run's header."""

    id: str
    created_at: str
    variant: str
    variant_hash: str
    config: dict[str, Any]
    status: str
    node_key: str | None = None
    pipeline_id: str | None = None


@dataclass
class EpisodeRow:
    """One stored episode as summaries need it."""

    task_id: str
    trial: int
    end_reason: str
    turns: int
    usage: Usage
    user_usage: Usage
    duration_s: float
    verdict: Verdict | None


@dataclass
class PipelineInfo:
    """A stored pipeline execution: its resolved configuration and what each node did."""

    id: str
    name: str
    created_at: str
    status: str
    config: dict[str, Any]
    nodes: dict[str, Any]


class Store:
    """A results file. Safe to open from several processes (SQLite WAL)."""

    def __init__(self, path: Path = RESULTS_STORE):
        self.path = path
        self.db = open_results(path)

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------ pipelines

    def new_pipeline(self, name: str, config: dict[str, Any], pipeline_id: str = "") -> str:
        """Record a pipeline execution (or, given an existing id, mark it running again)."""
        pipeline_id = pipeline_id or new_id("dag-")
        with self.db:
            self.db.execute(
                "INSERT INTO pipelines (id, name, created_at, status, config)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET status = 'running'",
                (pipeline_id, name, _now(), "running", redact(json.dumps(config, sort_keys=True))),
            )
        return pipeline_id

    def finish_pipeline(self, pipeline_id: str, status: str, nodes: dict[str, Any]) -> None:
        with self.db:
            self.db.execute(
                "UPDATE pipelines SET status = ?, nodes = ? WHERE id = ?",
                (status, json.dumps(nodes), pipeline_id),
            )

    def pipeline(self, pipeline_id: str) -> PipelineInfo | None:
        row = self.db.execute("SELECT * FROM pipelines WHERE id = ?", (pipeline_id,)).fetchone()
        return _pipeline(row) if row else None

    def pipelines(self, limit: int = 50) -> list[PipelineInfo]:
        rows = self.db.execute(
            "SELECT * FROM pipelines ORDER BY created_at DESC, id DESC LIMIT ?", (limit,)
        )
        return [_pipeline(row) for row in rows]

    def node_output(self, key: str) -> str | None:
        """The stored output of a finished node with this key (its cache entry)."""
        row = self.db.execute("SELECT output FROM node_outputs WHERE key = ?", (key,)).fetchone()
        return row["output"] if row else None

    def put_node_output(self, key: str, kind: str, output: str, pipeline_id: str) -> None:
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO node_outputs (key, kind, output, pipeline_id, finished_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (key, kind, redact(output), pipeline_id, _now()),
            )

    # ------------------------------------------------------------ runs and episodes

    def new_run(
        self,
        variant: str,
        variant_hash: str,
        config: dict[str, Any],
        node_key: str | None = None,
        pipeline_id: str | None = None,
    ) -> str:
        """Record a new run and return its id (time-ordered, unique)."""
        run_id = new_id()
        with self.db:
            self.db.execute(
                "INSERT INTO runs (id, created_at, variant, variant_hash, config, status,"
                " node_key, pipeline_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    _now(),
                    variant,
                    variant_hash,
                    redact(json.dumps(config, sort_keys=True)),
                    "running",
                    node_key,
                    pipeline_id,
                ),
            )
        return run_id

    def finish_run(self, run_id: str, status: str = "done") -> None:
        with self.db:
            self.db.execute("UPDATE runs SET status = ? WHERE id = ?", (status, run_id))

    def update_run_config(self, run_id: str, values: dict[str, Any]) -> None:
        """Add to a run's recorded configuration (e.g. the judge that graded it)."""
        info = self.run(run_id)
        if info is not None:
            with self.db:
                self.db.execute(
                    "UPDATE runs SET config = ? WHERE id = ?",
                    (redact(json.dumps({**info.config, **values}, sort_keys=True)), run_id),
                )

    def run(self, run_id: str) -> RunInfo | None:
        row = self.db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return _run(row) if row else None

    def run_for_key(self, node_key: str) -> RunInfo | None:
        """The newest run a node with this key started, finished or not (to resume it)."""
        row = self.db.execute(
            "SELECT * FROM runs WHERE node_key = ? ORDER BY created_at DESC, id DESC LIMIT 1",
            (node_key,),
        ).fetchone()
        return _run(row) if row else None

    def runs(self, pipeline_id: str | None = None) -> list[RunInfo]:
        """Every run, or a pipeline's runs, oldest first."""
        query = "SELECT * FROM runs" + (" WHERE pipeline_id = ?" if pipeline_id else "")
        rows = self.db.execute(
            query + " ORDER BY created_at, id", (pipeline_id,) if pipeline_id else ()
        )
        return [_run(row) for row in rows]

    def add_episode(
        self,
        run_id: str,
        transcript: Transcript,
        trace_id: str | None = None,
        call_id: str | None = None,
    ) -> None:
        """Store a finished episode (its own transaction, so a crash keeps every stored one)."""
        usage = {
            "agent": transcript.usage.model_dump(),
            "user": transcript.user_usage.model_dump(),
            "duration_s": transcript.duration_s,
        }
        with self.db:
            self.db.execute(
                "INSERT INTO episodes (run_id, task_id, trial, end_reason, turns, transcript,"
                " usage, trace_id, call_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    transcript.task_id,
                    transcript.trial,
                    transcript.end_reason.value,
                    transcript.turns,
                    redact(transcript.model_dump_json()),
                    json.dumps(usage),
                    trace_id,
                    call_id,
                ),
            )

    def episode_keys(self, run_id: str) -> set[tuple[str, int]]:
        """(task id, trial) of every stored episode of a run."""
        rows = self.db.execute("SELECT task_id, trial FROM episodes WHERE run_id = ?", (run_id,))
        return {(row["task_id"], row["trial"]) for row in rows}

    def episode_rows(self, run_id: str) -> Iterator[EpisodeRow]:
        """Each episode's outcome without its transcript (cheap, for summaries), with its
        newest verdict when it has one."""
        rows = self.db.execute(
            "SELECT e.task_id, e.trial, e.end_reason, e.turns, e.usage, v.verdict"
            " FROM episodes e LEFT JOIN verdicts v ON v.id = ("
            "  SELECT MAX(id) FROM verdicts w WHERE w.run_id = e.run_id"
            "  AND w.task_id = e.task_id AND w.trial = e.trial)"
            " WHERE e.run_id = ? ORDER BY e.task_id, e.trial",
            (run_id,),
        )
        for row in rows:
            spent = json.loads(row["usage"])
            yield EpisodeRow(
                task_id=row["task_id"],
                trial=row["trial"],
                end_reason=row["end_reason"],
                turns=row["turns"],
                usage=Usage(**spent["agent"]),
                user_usage=Usage(**spent["user"]),
                duration_s=spent["duration_s"],
                verdict=Verdict.model_validate_json(row["verdict"]) if row["verdict"] else None,
            )

    def transcripts(self, run_id: str) -> Iterator[tuple[Transcript, str | None, str | None]]:
        """The run's transcripts with their trace and call ids, streamed by task and trial."""
        rows = self.db.execute(
            "SELECT transcript, trace_id, call_id FROM episodes WHERE run_id = ?"
            " ORDER BY task_id, trial",
            (run_id,),
        )
        for row in rows:
            yield Transcript.model_validate_json(row["transcript"]), row["trace_id"], row["call_id"]

    # ------------------------------------------------------------ baseline and gate history

    def set_baseline(self, run_id: str, name: str = "default") -> None:
        """Make a run the baseline that gates compare candidates with."""
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO baselines (name, run_id, set_at) VALUES (?, ?, ?)",
                (name, run_id, _now()),
            )

    def baseline(self, name: str = "default") -> str | None:
        row = self.db.execute("SELECT run_id FROM baselines WHERE name = ?", (name,)).fetchone()
        return row["run_id"] if row else None

    def add_gate_result(
        self,
        candidate_run: str,
        baseline_run: str | None,
        variant: str,
        passed: bool,
        pass_rate: float,
        reasons: list[str],
    ) -> None:
        with self.db:
            self.db.execute(
                "INSERT INTO gate_history (at, candidate_run, baseline_run, variant, passed,"
                " pass_rate, reasons) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    _now(),
                    candidate_run,
                    baseline_run,
                    variant,
                    int(passed),
                    pass_rate,
                    json.dumps(reasons),
                ),
            )

    def gate_history(self) -> list[dict[str, Any]]:
        rows = self.db.execute(
            "SELECT at, candidate_run, baseline_run, variant, passed, pass_rate, reasons"
            " FROM gate_history ORDER BY id"
        )
        return [dict(row) for row in rows]

    # ------------------------------------------------------------ verdicts

    def add_verdict(self, run_id: str, verdict: Verdict) -> None:
        """Store a verdict; older verdicts of the same episode are kept (re-scoring)."""
        with self.db:
            self.db.execute(
                "INSERT INTO verdicts (run_id, task_id, trial, outcome, score, graded_at, verdict)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    verdict.task_id,
                    verdict.trial,
                    verdict.outcome,
                    verdict.score,
                    _now(),
                    redact(verdict.model_dump_json()),
                ),
            )

    def latest_verdicts(self, run_id: str) -> Iterator[Verdict]:
        """The newest verdict of every episode of a run, ordered by task and trial."""
        rows = self.db.execute(
            "SELECT verdict FROM verdicts v WHERE run_id = ? AND id = ("
            " SELECT MAX(id) FROM verdicts w WHERE w.run_id = v.run_id"
            " AND w.task_id = v.task_id AND w.trial = v.trial) ORDER BY task_id, trial",
            (run_id,),
        )
        for row in rows:
            yield Verdict.model_validate_json(row["verdict"])


def _run(row: sqlite3.Row) -> RunInfo:
    return RunInfo(
        id=row["id"],
        created_at=row["created_at"],
        variant=row["variant"],
        variant_hash=row["variant_hash"],
        config=json.loads(row["config"]),
        status=row["status"],
        node_key=row["node_key"],
        pipeline_id=row["pipeline_id"],
    )


def _pipeline(row: sqlite3.Row) -> PipelineInfo:
    return PipelineInfo(
        id=row["id"],
        name=row["name"],
        created_at=row["created_at"],
        status=row["status"],
        config=json.loads(row["config"]),
        nodes=json.loads(row["nodes"]),
    )

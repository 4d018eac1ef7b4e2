"""The results store: runs, episodes (full transcripts) and verdicts in one SQLite file.

Everything is redacted on the way in: an API key never reaches the file.

Episodes and verdicts are written as they finish, so a crash loses nothing already done and a
large run is never held in memory.
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

from harness.grading.result import Verdict
from harness.secrets import redact
from harness.transcript import Transcript

DEFAULT_STORE = Path(".harness/results.db")
SCHEMA_VERSION = 1
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    variant TEXT NOT NULL,
    variant_hash TEXT NOT NULL,
    config TEXT NOT NULL,
    status TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS episodes (
    run_id TEXT NOT NULL REFERENCES runs(id),
    task_id TEXT NOT NULL,
    trial INTEGER NOT NULL,
    end_reason TEXT NOT NULL,
    turns INTEGER NOT NULL,
    transcript TEXT NOT NULL,
    PRIMARY KEY (run_id, task_id, trial)
);
CREATE TABLE IF NOT EXISTS verdicts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(id),
    task_id TEXT NOT NULL,
    trial INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    score REAL NOT NULL,
    graded_at TEXT NOT NULL,
    verdict TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS verdicts_by_run ON verdicts(run_id, task_id, trial);
"""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class RunInfo:
    """A stored run's header."""

    id: str
    created_at: str
    variant: str
    variant_hash: str
    config: dict[str, Any]
    status: str


class Store:
    """A results file. Safe to open from several processes (SQLite WAL)."""

    def __init__(self, path: Path = DEFAULT_STORE):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, timeout=30)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, SCHEMA_VERSION):
            raise RuntimeError(
                f"{path}: results store version {version}, expected {SCHEMA_VERSION}"
            )
        self.db.executescript(SCHEMA)
        self.db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        self.db.commit()

    def close(self) -> None:
        self.db.close()

    def new_run(self, variant: str, variant_hash: str, config: dict[str, Any]) -> str:
        """Record a new run and return its id (time-ordered, unique)."""
        run_id = datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)
        self.db.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?)",
            (
                run_id,
                _now(),
                variant,
                variant_hash,
                redact(json.dumps(config, sort_keys=True)),
                "running",
            ),
        )
        self.db.commit()
        return run_id

    def finish_run(self, run_id: str, status: str = "done") -> None:
        self.db.execute("UPDATE runs SET status = ? WHERE id = ?", (status, run_id))
        self.db.commit()

    def add_episode(self, run_id: str, transcript: Transcript, verdict: Verdict) -> None:
        """Store a finished episode and its verdict in one transaction."""
        with self.db:
            self.db.execute(
                "INSERT INTO episodes VALUES (?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    transcript.task_id,
                    transcript.trial,
                    transcript.end_reason.value,
                    transcript.turns,
                    redact(transcript.model_dump_json()),
                ),
            )
            self._insert_verdict(run_id, verdict)

    def add_verdict(self, run_id: str, verdict: Verdict) -> None:
        """Store a new verdict for a stored episode (re-scoring); older verdicts are kept."""
        with self.db:
            self._insert_verdict(run_id, verdict)

    def _insert_verdict(self, run_id: str, verdict: Verdict) -> None:
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

    def run(self, run_id: str) -> RunInfo | None:
        row = self.db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            return None
        return RunInfo(row[0], row[1], row[2], row[3], json.loads(row[4]), row[5])

    def transcripts(self, run_id: str) -> Iterator[Transcript]:
        """The run's transcripts, streamed, ordered by task and trial."""
        rows = self.db.execute(
            "SELECT transcript FROM episodes WHERE run_id = ? ORDER BY task_id, trial", (run_id,)
        )
        for (text,) in rows:
            yield Transcript.model_validate_json(text)

    def latest_verdicts(self, run_id: str) -> Iterator[Verdict]:
        """The newest verdict of every episode of a run, ordered by task and trial."""
        rows = self.db.execute(
            "SELECT verdict FROM verdicts v WHERE run_id = ? AND id = ("
            " SELECT MAX(id) FROM verdicts w WHERE w.run_id = v.run_id"
            " AND w.task_id = v.task_id AND w.trial = v.trial) ORDER BY task_id, trial",
            (run_id,),
        )
        for (text,) in rows:
            yield Verdict.model_validate_json(text)

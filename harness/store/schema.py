"""The results file's tables, and opening the file at the schema version this harness reads.

The schema is shared with stored results of earlier runs; a change that old files cannot take
bumps `SCHEMA_VERSION`, and an older file is refused rather than misread.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from harness.sqlite import connect

SCHEMA_VERSION = 2
SCHEMA = """
CREATE TABLE IF NOT EXISTS pipelines (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created_at TEXT NOT NULL,
    status TEXT NOT NULL,
    config TEXT NOT NULL,
    nodes TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    variant TEXT NOT NULL,
    variant_hash TEXT NOT NULL,
    config TEXT NOT NULL,
    status TEXT NOT NULL,
    node_key TEXT,
    pipeline_id TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_key ON runs(node_key);
CREATE TABLE IF NOT EXISTS episodes (
    run_id TEXT NOT NULL REFERENCES runs(id),
    task_id TEXT NOT NULL,
    trial INTEGER NOT NULL,
    end_reason TEXT NOT NULL,
    turns INTEGER NOT NULL,
    transcript TEXT NOT NULL,
    usage TEXT NOT NULL,
    trace_id TEXT,
    call_id TEXT,
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
CREATE TABLE IF NOT EXISTS baselines (
    name TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    set_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS gate_history (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,
    candidate_run TEXT NOT NULL,
    baseline_run TEXT,
    variant TEXT NOT NULL,
    passed INTEGER NOT NULL,
    pass_rate REAL NOT NULL,
    reasons TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS node_outputs (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    output TEXT NOT NULL,
    pipeline_id TEXT NOT NULL,
    finished_at TEXT NOT NULL
);
"""


def open_results(path: Path) -> sqlite3.Connection:
    """Open (or create) a results file, refusing one written at another schema version."""
    db = connect(path)
    version = db.execute("PRAGMA user_version").fetchone()["user_version"]
    if version not in (0, SCHEMA_VERSION):
        db.close()
        raise RuntimeError(
            f"{path}: results store of an older harness (version {version}, this one reads "
            f"{SCHEMA_VERSION}); move it aside or pass another --store"
        )
    db.executescript(SCHEMA)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    db.commit()
    return db

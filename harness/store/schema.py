"""The results file's tables, and opening the file at the schema version this harness reads.

The schema is shared with stored results of earlier runs; a change bumps `SCHEMA_VERSION` and
upgrades older files in place when it can (`UPGRADES`); any other file is refused, untouched,
rather than misread. Opening a file at the current version writes nothing, so that readers
beside a running pipeline never wait for its lock.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from harness.specs.located import Location, SpecError
from harness.sqlite import StoreBusy, connect, write

SCHEMA_VERSION = 4
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
    verdict TEXT NOT NULL,
    grading TEXT NOT NULL DEFAULT ''  -- one grading pass: an episode has one verdict in it
);
CREATE INDEX IF NOT EXISTS verdicts_by_run ON verdicts(run_id, task_id, trial);
CREATE UNIQUE INDEX IF NOT EXISTS verdicts_once ON verdicts(run_id, task_id, trial, grading);
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
CREATE TABLE IF NOT EXISTS climbs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created_at TEXT NOT NULL,
    production TEXT NOT NULL,
    config TEXT NOT NULL,
    status TEXT NOT NULL,
    decision TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS climb_candidates (
    climb_id TEXT NOT NULL REFERENCES climbs(id),
    candidate TEXT NOT NULL,
    parent TEXT,
    changes TEXT NOT NULL,
    diff TEXT NOT NULL,
    status TEXT NOT NULL,
    note TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    PRIMARY KEY (climb_id, candidate)
);
CREATE TABLE IF NOT EXISTS climb_evaluations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    climb_id TEXT NOT NULL REFERENCES climbs(id),
    candidate TEXT NOT NULL,
    purpose TEXT NOT NULL,  -- search (GEPA's minibatches and train set) or acceptance
    run_id TEXT,
    scores TEXT NOT NULL,
    cost_usd REAL NOT NULL,
    episodes INTEGER NOT NULL,
    at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS climb_evaluations_by_climb ON climb_evaluations(climb_id, id);
"""


# Version 2 -> 3: a verdict belongs to a grading pass, so that a resumed pass grades an episode
# once; the verdicts of a version-2 file each count as a pass of their own.
UPGRADES = {
    2: (
        "ALTER TABLE verdicts ADD COLUMN grading TEXT NOT NULL DEFAULT ''",
        "UPDATE verdicts SET grading = 'v2-' || id",
    ),
    3: (),  # 3 -> 4: the climb tables are new (SCHEMA creates them)
}
TABLES = frozenset(
    {
        "pipelines",
        "runs",
        "episodes",
        "verdicts",
        "baselines",
        "gate_history",
        "node_outputs",
        "climbs",
        "climb_candidates",
        "climb_evaluations",
    }
)


def open_results(path: Path) -> sqlite3.Connection:
    """Open (or create) a results file at this harness's schema version. A file that is not a
    results store (a folder, text, another SQLite file) or cannot be opened is bad input: one
    line naming it, and the file is left as it was."""
    where = Location(str(path))
    if path.is_dir():
        raise SpecError.at(where, "", "not a results store: it is a folder")
    try:
        db = connect(path, isolation_level=None)
    except (sqlite3.Error, OSError) as exc:
        raise SpecError.at(where, "", f"cannot open the results store: {_reason(exc)}") from None
    try:
        if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            write(db, lambda db: _upgrade(db, where))
    except (SpecError, StoreBusy):
        db.close()
        raise
    except sqlite3.Error as exc:
        db.close()
        raise SpecError.at(where, "", f"not a results store: {_reason(exc)}") from None
    return db


def _upgrade(db: sqlite3.Connection, where: Location) -> None:
    """Create the tables of a new file, or upgrade an older one (in one write transaction, so
    that two processes opening a new file do it once)."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if version == 0 and tables - TABLES - {"sqlite_sequence"}:
        others = ", ".join(sorted(tables - TABLES))
        raise SpecError.at(where, "", f"not a results store: it holds other tables ({others})")
    if version not in (0, *UPGRADES):
        age = "a newer" if version > SCHEMA_VERSION else "an older"
        raise SpecError.at(
            where,
            "",
            f"results store of {age} harness (version {version}, this one reads "
            f"{SCHEMA_VERSION}); move it aside or pass another --store",
        )
    for statement in UPGRADES.get(version, ()):
        db.execute(statement)
    for statement in filter(str.strip, SCHEMA.split(";")):
        db.execute(statement)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")


def _reason(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__

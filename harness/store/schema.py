"""The results store's tables, one definition for both backends, and its migrations.

The schema is shared with stored results of earlier runs; a change bumps `SCHEMA_VERSION` and
upgrades older stores in place when it can (`UPGRADES`); any other store is refused, untouched,
rather than misread. SQLite keeps the version in `PRAGMA user_version`, PostgreSQL in the
`harness_schema` table. `DIALECTS` is all that differs between the two: an autoincrement key,
a float as wide as SQLite's REAL, text sorted byte by byte as SQLite sorts it, and an explicit
`rowid` (SQLite has one implicitly) that keeps the sequence of rows set within the same second.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from harness.specs.located import Location, SpecError

SCHEMA_VERSION = 7
# `{serial}`, `{real}`, `{rowid}` and every TEXT are written in each dialect's words (DIALECTS);
# `{{}}` is a literal `{}`.
SCHEMA = """
CREATE TABLE IF NOT EXISTS pipelines (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created_at TEXT NOT NULL,
    status TEXT NOT NULL,
    config TEXT NOT NULL,
    nodes TEXT NOT NULL DEFAULT '{{}}'
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
CREATE TABLE IF NOT EXISTS states (
    hash TEXT PRIMARY KEY,  -- sha256 of the state's canonical JSON (harness.state_diff)
    state TEXT NOT NULL  -- a start state, kept once however many tasks and runs share it
);
CREATE TABLE IF NOT EXISTS tasks (
    run_id TEXT NOT NULL REFERENCES runs(id),
    task_id TEXT NOT NULL,
    position INTEGER NOT NULL,  -- its place in the run's task set
    content_hash TEXT NOT NULL,  -- as the run's suite records it (config.suite)
    level INTEGER NOT NULL,
    tags TEXT NOT NULL,  -- JSON list
    spec TEXT NOT NULL,  -- JSON: the task as played, its start state {{"$state": hash}} (states)
    file TEXT NOT NULL,  -- the file it was read from
    PRIMARY KEY (run_id, task_id)
);
CREATE TABLE IF NOT EXISTS episodes (
    run_id TEXT NOT NULL REFERENCES runs(id),
    task_id TEXT NOT NULL,
    trial INTEGER NOT NULL,
    end_reason TEXT NOT NULL,
    turns INTEGER NOT NULL,
    transcript TEXT NOT NULL,  -- JSON: final_state {{"$state": hash, "$changes": [...]}} or whole
    usage TEXT NOT NULL,
    trace_id TEXT,
    call_id TEXT,
    PRIMARY KEY (run_id, task_id, trial)
);
CREATE TABLE IF NOT EXISTS verdicts (
    id {serial},
    run_id TEXT NOT NULL REFERENCES runs(id),
    task_id TEXT NOT NULL,
    trial INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    score {real} NOT NULL,
    graded_at TEXT NOT NULL,
    verdict TEXT NOT NULL,
    grading TEXT NOT NULL DEFAULT ''  -- one grading pass: an episode has one verdict in it
);
CREATE INDEX IF NOT EXISTS verdicts_by_run ON verdicts(run_id, task_id, trial);
CREATE UNIQUE INDEX IF NOT EXISTS verdicts_once ON verdicts(run_id, task_id, trial, grading);
CREATE TABLE IF NOT EXISTS baselines ({rowid}
    name TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    set_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS gate_history (
    id {serial},
    at TEXT NOT NULL,
    candidate_run TEXT NOT NULL,
    baseline_run TEXT,
    variant TEXT NOT NULL,
    passed INTEGER NOT NULL,
    pass_rate {real} NOT NULL,
    reasons TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS gate_results (
    id {serial},
    candidate_run TEXT NOT NULL,
    baseline_run TEXT,
    result TEXT NOT NULL  -- JSON: a decision whole (harness.gate.GateResult), as gate_history's
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
    decision TEXT NOT NULL DEFAULT '{{}}'
);
CREATE TABLE IF NOT EXISTS climb_candidates ({rowid}
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
    id {serial},
    climb_id TEXT NOT NULL REFERENCES climbs(id),
    candidate TEXT NOT NULL,
    purpose TEXT NOT NULL,  -- search (GEPA's minibatches and train set) or acceptance
    run_id TEXT,
    scores TEXT NOT NULL,
    cost_usd {real} NOT NULL,
    episodes INTEGER NOT NULL,
    at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS climb_evaluations_by_climb ON climb_evaluations(climb_id, id);
CREATE TABLE IF NOT EXISTS fidelity (
    id {serial},
    run_id TEXT NOT NULL REFERENCES runs(id),
    at TEXT NOT NULL,
    source TEXT NOT NULL,
    report TEXT NOT NULL  -- JSON: a sim-to-real report (harness.fidelity)
);
CREATE TABLE IF NOT EXISTS judge_calibrations (
    id {serial},
    judge TEXT NOT NULL,  -- the judge's key (harness.production.calibrate.judge_key)
    at TEXT NOT NULL,
    source TEXT NOT NULL,
    judged INTEGER NOT NULL,
    kappa {real},
    accuracy {real},
    report TEXT NOT NULL  -- JSON: the calibration (confusion table, interval, bias)
);
"""


# Version 2 -> 3: a verdict belongs to a grading pass, so that a resumed pass grades an episode
# once; the verdicts of a version-2 file each count as a pass of their own. (A PostgreSQL store
# began at version 4; its upgrades will be these same statements.)
UPGRADES = {
    2: (
        "ALTER TABLE verdicts ADD COLUMN grading TEXT NOT NULL DEFAULT ''",
        "UPDATE verdicts SET grading = 'v2-' || id",
    ),
    3: (),  # 3 -> 4: the climb tables are new (SCHEMA creates them)
    # 4 -> 5: the tasks each run played are new (SCHEMA creates the table); a run stored before
    # has none there, and its readers load its task files instead.
    4: (),
    # 5 -> 6: sim-to-real reports, judge calibrations and shared start states are new (SCHEMA
    # creates them); tasks and episodes stored before keep their states whole, and read as such
    5: (),
    # 6 -> 7: each gate decision whole, its rules with their figures, for the report (SCHEMA
    # creates the table); the decisions stored before keep only their reasons
    6: (),
}
DIALECTS: dict[str, dict[str, str]] = {
    "sqlite": {
        "serial": "INTEGER PRIMARY KEY AUTOINCREMENT",
        "real": "REAL",
        "rowid": "",
        "text": "TEXT",
    },
    "postgresql": {
        "serial": "BIGSERIAL PRIMARY KEY",
        "real": "DOUBLE PRECISION",  # PostgreSQL's REAL has 24 bits: not SQLite's answers
        "rowid": "\n    rowid BIGSERIAL NOT NULL,",
        "text": 'TEXT COLLATE "C"',  # bytewise, as SQLite sorts (a locale would not)
    },
}
TABLES = frozenset(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", SCHEMA))  # every table


def statements(dialect: str) -> list[str]:
    """The statements that create the current schema's tables in a dialect (idempotent)."""
    words = DIALECTS[dialect]
    text = re.sub(r"\bTEXT\b", words["text"], SCHEMA.format(**words))
    return [statement for statement in text.split(";") if statement.strip()]


def upgrade(execute: Callable[[str], Any], dialect: str, version: int, where: Location) -> None:
    """Bring a store at `version` (0: new) to `SCHEMA_VERSION`, in the caller's write
    transaction; the caller records the new version. A store of a version this harness does
    not know is refused, untouched."""
    if version not in (0, *UPGRADES):
        age = "a newer" if version > SCHEMA_VERSION else "an older"
        raise SpecError.at(
            where,
            "",
            f"results store of {age} harness (version {version}, this one reads "
            f"{SCHEMA_VERSION}); move it aside or pass another --store",
        )
    for step in range(version, SCHEMA_VERSION) if version else ():  # each step since, in turn
        for statement in UPGRADES[step]:
            execute(statement)
    for statement in statements(dialect):
        execute(statement)

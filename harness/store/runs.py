"""A run's records in the results store: starting, claiming, finishing and copying runs, their
configuration, and reading them back."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from harness.store.database import Database
from harness.store.rows import RunInfo, insert_run, run_info, stored_json
from harness.store.tasks import StoredTask, copy_tasks, insert_tasks


class RunRecords:
    """The `runs` table, as methods of the results store."""

    db: Database

    def new_run(
        self,
        variant: str,
        variant_hash: str,
        config: dict[str, Any],
        node_key: str | None = None,
        pipeline_id: str | None = None,
    ) -> str:
        """Record a new run and return its id (time-ordered, unique)."""
        return self.db.write(
            lambda db: insert_run(db, variant, variant_hash, config, node_key, pipeline_id),
        )

    def claim_run(
        self,
        variant: str,
        variant_hash: str,
        config: dict[str, Any],
        node_key: str,
        pipeline_id: str | None = None,
    ) -> RunInfo:
        """The newest run a node with this key started (to resume it), or a new one: decided in
        one transaction, so that two processes running the same node share one run."""

        def claim(db: Database) -> str:
            claimed = _claimed_run(db, node_key)
            if claimed is not None:
                return claimed
            return insert_run(db, variant, variant_hash, config, node_key, pipeline_id)

        info = self.run(self.db.write(claim))
        assert info is not None
        return info

    def finish_run(self, run_id: str, status: str = "done") -> None:
        self.db.write(
            lambda db: db.execute("UPDATE runs SET status = ? WHERE id = ?", (status, run_id)),
        )

    def update_run_config(self, run_id: str, values: dict[str, Any]) -> None:
        """Add to a run's recorded configuration (e.g. the judge that graded it); read and
        written in one transaction, so that no other process's addition is lost."""

        def update(db: Database) -> None:
            config = _locked_config(db, run_id)
            if config is not None:
                _set_config(db, run_id, {**config, **values})

        self.db.write(update)

    def claim_grading(self, run_id: str, grading: str, values: dict[str, Any]) -> bool:
        """Make `grading` the run's one grading pass, recording it and `values` (its judge) in
        the run's configuration, unless another pass graded the run first; True when the pass
        is (now) the run's. Decided in one transaction: a run's verdicts, once a gate may have
        read them, are never joined by another pass's (a regrade grades a copy, `copy_run`). A
        run graded before passes were recorded belongs to the pass that graded it, if only one."""

        def claim(db: Database) -> bool:
            config = _locked_config(db, run_id)
            if config is None:
                return False
            if "grading" in config:
                return bool(config["grading"] == grading)
            other = db.execute(
                "SELECT 1 FROM verdicts WHERE run_id = ? AND grading <> ? LIMIT 1",
                (run_id, grading),
            ).fetchone()
            if other is not None:
                return False
            _set_config(db, run_id, {**config, **values, "grading": grading})
            return True

        return self.db.write(claim)

    def copy_run(
        self,
        run_id: str,
        values: dict[str, Any],
        node_key: str | None = None,
        pipeline_id: str | None = None,
        tasks: Sequence[StoredTask] | None = None,
    ) -> str:
        """A new run of the same variant holding copies of a run's episodes (their transcripts,
        not their verdicts) and of its tasks, its configuration the run's with `values` added:
        a regrade grades the copy, so that the verdicts read on the first run never change and
        the regrade has an id of its own. With `tasks`, the copy records those instead (the
        tasks' current content, which a regrade grades with). One transaction; with a node
        key, the copy that key made before is returned instead (resumed, never made twice)."""

        def copy(db: Database) -> str:
            if node_key is not None:
                claimed = _claimed_run(db, node_key)
                if claimed is not None:
                    return claimed
            row = db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise LookupError(f"no run {run_id!r} in the store")
            source = run_info(row)
            config = {**source.config, **values}
            new = insert_run(db, source.variant, source.variant_hash, config, node_key, pipeline_id)
            db.execute(
                "INSERT INTO episodes (run_id, task_id, trial, end_reason, turns, transcript,"
                " usage, trace_id, call_id) SELECT ?, task_id, trial, end_reason, turns,"
                " transcript, usage, trace_id, call_id FROM episodes WHERE run_id = ?",
                (new, run_id),
            )
            if tasks is None:
                copy_tasks(db, run_id, new)
            else:
                insert_tasks(db, new, tasks)
            return new

        return self.db.write(copy)

    def run(self, run_id: str) -> RunInfo | None:
        row = self.db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return run_info(row) if row else None

    def run_for_key(self, node_key: str) -> RunInfo | None:
        """The newest run a node with this key started, finished or not (to resume it)."""
        row = self.db.execute(
            "SELECT * FROM runs WHERE node_key = ? ORDER BY created_at DESC, id DESC LIMIT 1",
            (node_key,),
        ).fetchone()
        return run_info(row) if row else None

    def runs(self, pipeline_id: str | None = None) -> list[RunInfo]:
        """Every run, or a pipeline's runs, oldest first."""
        query = "SELECT * FROM runs" + (" WHERE pipeline_id = ?" if pipeline_id else "")
        rows = self.db.execute(
            query + " ORDER BY created_at, id", (pipeline_id,) if pipeline_id else ()
        )
        return [run_info(row) for row in rows]


def _claimed_run(db: Database, node_key: str) -> str | None:
    """Inside a write: the newest run a node with this key started, holding the key's lock so
    that the caller's decision to start one instead is made once."""
    db.lock(f"claim {node_key}")
    row = db.execute(
        "SELECT id FROM runs WHERE node_key = ? ORDER BY created_at DESC, id DESC LIMIT 1",
        (node_key,),
    ).fetchone()
    return str(row["id"]) if row is not None else None


def _locked_config(db: Database, run_id: str) -> dict[str, Any] | None:
    """Inside a write: a run's configuration, locked until commit (None: no such run)."""
    db.lock(f"run {run_id}")
    row = db.execute("SELECT config FROM runs WHERE id = ?", (run_id,)).fetchone()
    return json.loads(row["config"]) if row is not None else None


def _set_config(db: Database, run_id: str, config: dict[str, Any]) -> None:
    text = stored_json(config)
    db.execute("UPDATE runs SET config = ? WHERE id = ?", (text, run_id))

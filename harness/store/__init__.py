"""The results store: pipelines, runs, the tasks each run played, episodes (full transcripts),
verdicts and cached node outputs in one SQLite file (the default), or in a PostgreSQL database
that runners on several machines share (`--store postgresql://...`, `$HARNESS_STORE`); the same
methods, the same answers.

A *run* is one variant's episodes over a task set (the output of a `simulate` node) with their
verdicts; a *pipeline* is one execution of a DAG, which may hold several runs. Episodes and
verdicts are written as they finish, so a crash loses nothing already done and a large run is
never held in memory. Everything is redacted on the way in: an API key never reaches the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from os import PathLike
from typing import TYPE_CHECKING, Any

from harness.defaults import RESULTS_STORE
from harness.grading.result import Verdict
from harness.secrets import redact
from harness.state_diff import apply_changes, changes_between, state_digest
from harness.store.climbs import CandidateInfo, ClimbInfo, ClimbRecords, EvaluationInfo
from harness.store.database import Database, Row, open_database
from harness.store.rows import (
    EpisodeRow,
    PipelineInfo,
    RunInfo,
    insert_run,
    new_id,
    now,
    pipeline_info,
    run_info,
)
from harness.store.tasks import (
    STATE,
    PlayedTask,
    StoredTask,
    TaskLabels,
    copy_tasks,
    insert_tasks,
    state_ref,
    stored_task,
    task_records,
)
from harness.store_location import StoreLocation
from harness.transcript import Transcript, Usage

CHANGES = "$changes"  # a stored final state: {"$state": start digest, "$changes": [...]}

if TYPE_CHECKING:
    from harness.sim.suite import TaskCase

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

PAGE = 200  # rows read at a time: no read is held open while the caller writes


class Store(ClimbRecords):
    """A results store, shared safely by several processes: every write is one short
    transaction (`Database.write`: SQLite's `BEGIN IMMEDIATE`, retried while another process
    holds the lock), rows are read a page at a time (a read held open across a write would fail
    it), and writing the same episode or verdict twice keeps the first (a resumed or doubled run
    is a no-op, not a crash)."""

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

    def put_node_output(self, key: str, kind: str, output: str, pipeline_id: str) -> None:
        values = (key, kind, redact(output), pipeline_id, now())
        self.db.write(
            lambda db: db.execute(
                "INSERT INTO node_outputs (key, kind, output, pipeline_id, finished_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET kind = excluded.kind,"
                " output = excluded.output, pipeline_id = excluded.pipeline_id,"
                " finished_at = excluded.finished_at",
                values,
            ),
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

    def add_run_tasks(
        self, run_id: str, cases: Sequence[TaskCase], hashes: Mapping[str, str]
    ) -> None:
        """Record the tasks a run plays, in order, each with its content hash (the run's
        suite), level, tags and spec, so that readers need no task file. A task the run
        recorded before (a resumed run, another process playing it) is kept as it is."""
        tasks = task_records(cases, hashes)
        self.db.write(lambda db: insert_tasks(db, run_id, tasks))
        for stored in tasks:
            if stored.start is not None:
                digest = state_digest(stored.start)
                self._states.setdefault(digest, stored.start)
                self._starts[(run_id, stored.task.id)] = digest

    def state(self, digest: str) -> dict[str, Any]:
        """A start state of the `states` table by its digest (parsed once; never change it)."""
        found = self._states.get(digest)
        if found is None:
            row = self.db.execute("SELECT state FROM states WHERE hash = ?", (digest,)).fetchone()
            if row is None:
                raise LookupError(f"no start state {digest[:12]} in {self.path}")
            found = self._states[digest] = json.loads(row["state"])
        return found

    def run_tasks(self, run_id: str) -> list[StoredTask]:
        """The tasks a run played, in order; none for a run stored by a harness from before
        the store kept them (its task files are all that says)."""
        rows = self.db.execute(
            "SELECT * FROM tasks WHERE run_id = ? ORDER BY position, task_id", (run_id,)
        )
        return [stored_task(row, self.state) for row in rows]

    def add_episode(
        self,
        run_id: str,
        transcript: Transcript,
        trace_id: str | None = None,
        call_id: str | None = None,
    ) -> None:
        """Store a finished episode (its own transaction, so a crash keeps every stored one). An
        episode already stored (played by another process on the same run) is kept as it is."""
        usage = {
            "agent": transcript.usage.model_dump(),
            "user": transcript.user_usage.model_dump(),
            "duration_s": transcript.duration_s,
        }
        values = (
            run_id,
            transcript.task_id,
            transcript.trial,
            transcript.end_reason.value,
            transcript.turns,
            redact(self._stored_transcript(run_id, transcript)),
            json.dumps(usage),
            trace_id,
            call_id,
        )
        self.db.write(
            lambda db: db.execute(
                "INSERT INTO episodes (run_id, task_id, trial, end_reason, turns, transcript,"
                " usage, trace_id, call_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (run_id, task_id, trial) DO NOTHING",
                values,
            ),
        )

    def _stored_transcript(self, run_id: str, transcript: Transcript) -> str:
        """A transcript as JSON, its final state as the changes from the task's start state
        when the run recorded that state (`add_run_tasks`), else whole."""
        digest = self._starts.get((run_id, transcript.task_id))
        if digest is None:
            return transcript.model_dump_json()
        data = transcript.model_dump(mode="json", exclude={"final_state"})
        changes = changes_between(self._states[digest], transcript.final_state)
        data["final_state"] = {STATE: digest, CHANGES: changes}
        return json.dumps(data, default=str)

    def _transcript(self, text: str) -> Transcript:
        """A stored transcript, its final state rebuilt from its start state and changes."""
        if CHANGES not in text:
            return Transcript.model_validate_json(text)
        data = json.loads(text)
        final = data.get("final_state")
        digest = state_ref(final)
        if digest is not None and CHANGES in final:
            data["final_state"] = apply_changes(self.state(digest), final[CHANGES])
        return Transcript.model_validate(data)

    def has_episode(self, run_id: str, task_id: str, trial: int) -> bool:
        """Whether an episode is stored (perhaps by another process playing the same run)."""
        row = self.db.execute(
            "SELECT 1 FROM episodes WHERE run_id = ? AND task_id = ? AND trial = ?",
            (run_id, task_id, trial),
        ).fetchone()
        return row is not None

    def episode_keys(self, run_id: str) -> set[tuple[str, int]]:
        """(task id, trial) of every stored episode of a run."""
        rows = self.db.execute("SELECT task_id, trial FROM episodes WHERE run_id = ?", (run_id,))
        return {(row["task_id"], row["trial"]) for row in rows}

    def episode_rows(self, run_id: str) -> Iterator[EpisodeRow]:
        """Each episode's outcome without its transcript (cheap, for summaries), with its
        newest verdict when it has one."""
        rows = self._pages(
            "SELECT e.task_id, e.trial, e.end_reason, e.turns, e.usage, v.verdict"
            " FROM episodes e LEFT JOIN verdicts v ON v.id = ("
            "  SELECT MAX(id) FROM verdicts w WHERE w.run_id = e.run_id"
            "  AND w.task_id = e.task_id AND w.trial = e.trial)"
            " WHERE e.run_id = ? AND (e.task_id, e.trial) > (?, ?) ORDER BY e.task_id, e.trial",
            run_id,
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
        rows = self._pages(
            "SELECT task_id, trial, transcript, trace_id, call_id FROM episodes WHERE run_id = ?"
            " AND (task_id, trial) > (?, ?) ORDER BY task_id, trial",
            run_id,
        )
        for row in rows:
            yield self._transcript(row["transcript"]), row["trace_id"], row["call_id"]

    # ------------------------------------------------------------ baseline and gate history

    def set_baseline(self, run_id: str, name: str = "default") -> None:
        """Make a run the baseline that gates compare candidates with (replacing the suite's
        previous one: a new row, so that it sorts as the most recently set)."""

        def replace(db: Database) -> None:
            db.lock(f"baseline {name}")
            db.execute("DELETE FROM baselines WHERE name = ?", (name,))
            db.execute(
                "INSERT INTO baselines (name, run_id, set_at) VALUES (?, ?, ?)",
                (name, run_id, now()),
            )

        self.db.write(replace)

    def baseline(self, name: str = "default") -> str | None:
        row = self.db.execute("SELECT run_id FROM baselines WHERE name = ?", (name,)).fetchone()
        return row["run_id"] if row else None

    def baselines(self) -> list[tuple[str, str, str]]:
        """Every baseline as (name, run id, set at), the most recently set first (one per
        suite: the gate names a baseline by its suite)."""
        rows = self.db.execute(
            "SELECT name, run_id, set_at FROM baselines ORDER BY set_at DESC, rowid DESC"
        )
        return [(row["name"], row["run_id"], row["set_at"]) for row in rows]

    def add_gate_result(
        self,
        candidate_run: str,
        baseline_run: str | None,
        variant: str,
        passed: bool,
        pass_rate: float,
        reasons: list[str],
    ) -> None:
        values = (
            now(),
            candidate_run,
            baseline_run,
            variant,
            int(passed),
            pass_rate,
            json.dumps(reasons),
        )
        self.db.write(
            lambda db: db.execute(
                "INSERT INTO gate_history (at, candidate_run, baseline_run, variant, passed,"
                " pass_rate, reasons) VALUES (?, ?, ?, ?, ?, ?, ?)",
                values,
            )
        )

    def add_fidelity(self, run_id: str, source: str, report: str) -> None:
        """Keep a sim-to-real report (JSON) of a run, against a production source."""
        values = (run_id, now(), redact(source), redact(report))
        self.db.write(
            lambda db: db.execute(
                "INSERT INTO fidelity (run_id, at, source, report) VALUES (?, ?, ?, ?)", values
            )
        )

    def fidelity(self, run_id: str) -> str | None:
        """The newest sim-to-real report (JSON) of a run, or None."""
        row = self.db.execute(
            "SELECT report FROM fidelity WHERE run_id = ? ORDER BY id DESC LIMIT 1", (run_id,)
        ).fetchone()
        return row["report"] if row else None

    def add_judge_calibration(
        self,
        judge: str,
        source: str,
        judged: int,
        kappa: float | None,
        accuracy: float | None,
        report: str,
    ) -> None:
        """Keep a judge's agreement with human feedback (`harness judge calibrate`)."""
        values = (judge, now(), redact(source), judged, kappa, accuracy, redact(report))
        self.db.write(
            lambda db: db.execute(
                "INSERT INTO judge_calibrations (judge, at, source, judged, kappa, accuracy,"
                " report) VALUES (?, ?, ?, ?, ?, ?, ?)",
                values,
            )
        )

    def judge_calibration(self, judge: str) -> dict[str, Any] | None:
        """The newest calibration of a judge (by its key): at, source, judged, kappa,
        accuracy, and its confusion `table` (from its report, which every calibration kept:
        intervals are computed from it, so that a calibration stored before they existed reads
        the same); None when it was never calibrated."""
        row = self.db.execute(
            "SELECT at, source, judged, kappa, accuracy, report FROM judge_calibrations"
            " WHERE judge = ? ORDER BY id DESC LIMIT 1",
            (judge,),
        ).fetchone()
        if not row:
            return None
        found = dict(row)
        found["table"] = json.loads(found.pop("report")).get("table")
        return found

    def gate_history(self) -> list[dict[str, Any]]:
        rows = self.db.execute(
            "SELECT at, candidate_run, baseline_run, variant, passed, pass_rate, reasons"
            " FROM gate_history ORDER BY id"
        )
        return [dict(row) for row in rows]

    # ------------------------------------------------------------ verdicts

    def add_verdict(self, run_id: str, verdict: Verdict, grading: str) -> None:
        """Store a verdict of one grading pass (the run's one pass: `claim_grading`; a store
        from before that may hold older passes, and readers take the newest verdict). An
        episode graded again in the same pass keeps its first verdict."""
        values = (
            run_id,
            verdict.task_id,
            verdict.trial,
            verdict.outcome,
            verdict.score,
            now(),
            redact(verdict.model_dump_json()),
            grading,
        )
        self.db.write(
            lambda db: db.execute(
                "INSERT INTO verdicts (run_id, task_id, trial, outcome, score, graded_at, verdict,"
                " grading) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (run_id, task_id, trial, grading) DO NOTHING",
                values,
            ),
        )

    def graded_keys(self, run_id: str, grading: str) -> set[tuple[str, int]]:
        """(task id, trial) of every episode of a run that a grading pass has graded."""
        rows = self.db.execute(
            "SELECT task_id, trial FROM verdicts WHERE run_id = ? AND grading = ?",
            (run_id, grading),
        )
        return {(row["task_id"], row["trial"]) for row in rows}

    def grading_counts(self, run_id: str, grading: str) -> dict[str, int]:
        """A grading pass's verdicts of a run, by outcome."""
        rows = self.db.execute(
            "SELECT outcome, COUNT(*) AS n FROM verdicts WHERE run_id = ? AND grading = ?"
            " GROUP BY outcome",
            (run_id, grading),
        )
        return {row["outcome"]: row["n"] for row in rows}

    def unsandboxed_verdicts(self, run_id: str) -> int:
        """Verdicts of a run with a check whose code ran in the `subprocess` sandbox backend,
        which is no security boundary (for the run summary's warning)."""
        row = self.db.execute(
            "SELECT COUNT(*) AS n FROM verdicts WHERE run_id = ? AND verdict LIKE ?",
            (run_id, '%"sandbox":"subprocess"%'),
        ).fetchone()
        assert row is not None  # a COUNT always gives a row
        return int(row["n"])

    def latest_verdicts(self, run_id: str) -> Iterator[Verdict]:
        """The newest verdict of every episode of a run, ordered by task and trial."""
        rows = self._pages(
            "SELECT task_id, trial, verdict FROM verdicts v WHERE run_id = ? AND id = ("
            " SELECT MAX(id) FROM verdicts w WHERE w.run_id = v.run_id"
            " AND w.task_id = v.task_id AND w.trial = v.trial)"
            " AND (task_id, trial) > (?, ?) ORDER BY task_id, trial",
            run_id,
        )
        for row in rows:
            yield Verdict.model_validate_json(row["verdict"])

    def _pages(self, query: str, run_id: str) -> Iterator[Row]:
        """The rows of a run's query ordered by (task_id, trial), read `PAGE` at a time: each
        page is read whole, so no read stays open while the caller writes between rows. The
        query takes the run id and the last (task id, trial) seen."""
        after: tuple[str, int] = ("", -1)
        while True:
            rows = self.db.execute(query + f" LIMIT {PAGE}", (run_id, *after)).fetchall()
            yield from rows
            if len(rows) < PAGE:
                return
            after = (rows[-1]["task_id"], rows[-1]["trial"])


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
    text = redact(json.dumps(config, sort_keys=True))
    db.execute("UPDATE runs SET config = ? WHERE id = ?", (text, run_id))

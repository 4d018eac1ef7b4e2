"""The episodes of a run in the results store, with the tasks they played and their verdicts:
transcripts stored as the changes from each task's start state, read back a page at a time."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness.grading.result import Verdict
from harness.secrets import redact
from harness.state_diff import apply_changes, changes_between, state_digest
from harness.store.database import Database, Row
from harness.store.rows import EpisodeRow, now
from harness.store.tasks import (
    STATE,
    StoredTask,
    insert_tasks,
    state_ref,
    stored_task,
    task_records,
)
from harness.store_location import StoreLocation
from harness.transcript import Transcript, Usage

if TYPE_CHECKING:
    from harness.sim.suite import TaskCase

CHANGES = "$changes"  # a stored final state: {"$state": start digest, "$changes": [...]}
PAGE = 200  # rows read at a time: no read is held open while the caller writes


class EpisodeRecords:
    """The `tasks`, `states`, `episodes` and `verdicts` tables, as methods of the results
    store."""

    db: Database
    path: StoreLocation
    _states: dict[str, dict[str, Any]]  # digest -> a start state read or written
    _starts: dict[tuple[str, str], str]  # (run, task) -> its start state's digest

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

    def transcripts(
        self, run_id: str, ungraded_by: str | None = None
    ) -> Iterator[tuple[Transcript, str | None, str | None]]:
        """The run's transcripts with their trace and call ids, streamed by task and trial;
        with `ungraded_by`, only those that grading pass has not graded yet."""
        query = (
            "SELECT task_id, trial, transcript, trace_id, call_id FROM episodes e"
            " WHERE run_id = ? AND (task_id, trial) > (?, ?)"
        )
        if ungraded_by is not None:
            query += (
                " AND NOT EXISTS (SELECT 1 FROM verdicts v WHERE v.run_id = e.run_id"
                " AND v.task_id = e.task_id AND v.trial = e.trial AND v.grading = ?)"
            )
        extra = () if ungraded_by is None else (ungraded_by,)
        rows = self._pages(query + " ORDER BY task_id, trial", run_id, extra)
        for row in rows:
            yield self._transcript(row["transcript"]), row["trace_id"], row["call_id"]

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

    def _pages(self, query: str, run_id: str, extra: tuple[Any, ...] = ()) -> Iterator[Row]:
        """The rows of a run's query ordered by (task_id, trial), read `PAGE` at a time: each
        page is read whole, so no read stays open while the caller writes between rows. The
        query takes the run id, the last (task id, trial) seen and then `extra`."""
        after: tuple[str, int] = ("", -1)
        while True:
            parameters = (run_id, *after, *extra)
            rows = self.db.execute(query + f" LIMIT {PAGE}", parameters).fetchall()
            yield from rows
            if len(rows) < PAGE:
                return
            after = (rows[-1]["task_id"], rows[-1]["trial"])

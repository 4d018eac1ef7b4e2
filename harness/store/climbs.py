"""A climb's records in the results store: the climb, every candidate it proposed (its parent,
its changes to production and the diff against its parent, and what became of it), and every
evaluation of a candidate (the stored run it played, its scores, its cost).

They live beside the runs they point to, so that `harness climb show` and any later reader see
one history, whichever process wrote it and however often the climb was resumed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.secrets import redact
from harness.store.rows import now

if TYPE_CHECKING:
    from harness.store.database import Database


@dataclass
class ClimbInfo:
    """A stored climb's header and its decision (empty until it finishes)."""

    id: str
    name: str
    created_at: str
    production: str
    config: dict[str, Any]
    status: str
    decision: dict[str, Any]


@dataclass
class CandidateInfo:
    """One proposed candidate of a climb."""

    candidate: str
    parent: str | None
    changes: dict[str, Any]
    diff: str
    status: str  # production, proposed, kept, rejected, invalid, shipped, best, not shipped
    note: str
    created_at: str


@dataclass
class EvaluationInfo:
    """One evaluation of a candidate: a stored run, scored per task."""

    candidate: str
    purpose: str
    run_id: str | None
    scores: dict[str, float]
    cost_usd: float
    episodes: int
    at: str

    @property
    def mean(self) -> float:
        return sum(self.scores.values()) / len(self.scores) if self.scores else 0.0


class ClimbRecords:
    """The climb tables, as methods of the results store."""

    db: Database

    def start_climb(self, climb_id: str, name: str, production: str, config: dict) -> None:
        """Record a climb (or, resumed, mark it running again)."""
        values = (climb_id, name, now(), production, redact(json.dumps(config, sort_keys=True)))
        self.db.write(
            lambda db: db.execute(
                "INSERT INTO climbs (id, name, created_at, production, config, status)"
                " VALUES (?, ?, ?, ?, ?, 'running')"
                " ON CONFLICT(id) DO UPDATE SET status = 'running'",
                values,
            ),
        )

    def finish_climb(self, climb_id: str, status: str, decision: dict[str, Any]) -> None:
        values = (status, redact(json.dumps(decision)), climb_id)
        self.db.write(
            lambda db: db.execute(
                "UPDATE climbs SET status = ?, decision = ? WHERE id = ?", values
            ),
        )

    def add_candidate(
        self,
        climb_id: str,
        candidate: str,
        parent: str | None,
        changes: dict[str, Any],
        diff: str,
        status: str = "proposed",
        note: str = "",
    ) -> None:
        """Record a proposed candidate once; a candidate proposed again keeps its first
        parent."""
        values = (
            climb_id,
            candidate,
            parent,
            redact(json.dumps(changes)),
            redact(diff),
            status,
            note,
            now(),
        )
        self.db.write(
            lambda db: db.execute(
                "INSERT INTO climb_candidates"
                " (climb_id, candidate, parent, changes, diff, status, note, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                values,
            ),
        )

    def set_candidate_status(self, climb_id: str, candidate: str, status: str, note: str) -> None:
        values = (status, note, climb_id, candidate)
        self.db.write(
            lambda db: db.execute(
                "UPDATE climb_candidates SET status = ?, note = ? WHERE climb_id = ? AND"
                " candidate = ?",
                values,
            ),
        )

    def add_climb_evaluation(self, climb_id: str, evaluation: EvaluationInfo) -> None:
        e = evaluation
        values = (
            climb_id,
            e.candidate,
            e.purpose,
            e.run_id,
            json.dumps(e.scores),
            e.cost_usd,
            e.episodes,
            e.at,
        )
        self.db.write(
            lambda db: db.execute(
                "INSERT INTO climb_evaluations (climb_id, candidate, purpose, run_id, scores,"
                " cost_usd, episodes, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                values,
            ),
        )

    def climb(self, climb_id: str) -> ClimbInfo | None:
        row = self.db.execute("SELECT * FROM climbs WHERE id = ?", (climb_id,)).fetchone()
        if row is None:
            return None
        return ClimbInfo(
            row["id"],
            row["name"],
            row["created_at"],
            row["production"],
            json.loads(row["config"]),
            row["status"],
            json.loads(row["decision"]),
        )

    def climbs(self, limit: int = 50) -> list[str]:
        """Climb ids, newest first."""
        rows = self.db.execute(
            "SELECT id FROM climbs ORDER BY created_at DESC, id DESC LIMIT ?", (limit,)
        )
        return [row["id"] for row in rows]

    def climb_candidates(self, climb_id: str) -> list[CandidateInfo]:
        rows = self.db.execute(
            "SELECT * FROM climb_candidates WHERE climb_id = ? ORDER BY created_at, rowid",
            (climb_id,),
        )
        return [
            CandidateInfo(
                row["candidate"],
                row["parent"],
                json.loads(row["changes"]),
                row["diff"],
                row["status"],
                row["note"],
                row["created_at"],
            )
            for row in rows
        ]

    def climb_evaluations(self, climb_id: str) -> list[EvaluationInfo]:
        rows = self.db.execute(
            "SELECT * FROM climb_evaluations WHERE climb_id = ? ORDER BY id", (climb_id,)
        )
        return [
            EvaluationInfo(
                row["candidate"],
                row["purpose"],
                row["run_id"],
                json.loads(row["scores"]),
                row["cost_usd"],
                row["episodes"],
                row["at"],
            )
            for row in rows
        ]

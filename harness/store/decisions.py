"""What the results store keeps of decisions: the baselines, the gate's results and history,
fidelity reports and judge calibrations."""

from __future__ import annotations

import json
from typing import Any

from harness.secrets import redact
from harness.store.database import Database
from harness.store.rows import now


class DecisionRecords:
    """The `baselines`, `gate_history`, `fidelity` and `judge_calibrations` tables, as methods
    of the results store."""

    db: Database

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
        result: str = "",
    ) -> None:
        """Append a decision to the gate's history; `result`, the whole decision as JSON
        (`GateResult`), is what the report shows the rules from."""
        values = (
            now(),
            candidate_run,
            baseline_run,
            variant,
            int(passed),
            pass_rate,
            json.dumps(reasons),
        )

        def add(db: Database) -> None:
            db.execute(
                "INSERT INTO gate_history (at, candidate_run, baseline_run, variant, passed,"
                " pass_rate, reasons) VALUES (?, ?, ?, ?, ?, ?, ?)",
                values,
            )
            if result:
                db.execute(
                    "INSERT INTO gate_results (candidate_run, baseline_run, result)"
                    " VALUES (?, ?, ?)",
                    (candidate_run, baseline_run, redact(result)),
                )

        self.db.write(add)

    def gate_result(self, candidate_run: str, baseline_run: str | None) -> str | None:
        """The newest decision of the gate on `candidate_run` against `baseline_run`, whole
        (`GateResult` JSON); None when there is none, or it was stored before the store kept
        them (version 7)."""
        row = self.db.execute(
            "SELECT result FROM gate_results WHERE candidate_run = ? AND"
            " COALESCE(baseline_run, '') = ? ORDER BY id DESC LIMIT 1",
            (candidate_run, baseline_run or ""),
        ).fetchone()
        return row["result"] if row else None

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

"""The trend of the gate's decisions, from the history the store keeps: each week's pass rate
with its interval, and the drift since the first baseline, so that a series of small drops,
each of which passed its own gate against the candidate before, still shows.

A gate compares a candidate with the baseline it is given. When the baseline moves with every
candidate that passes (the ratchet: `harness baseline set` after each release), each gate sees
one small step and the steps add up unseen: 30 tasks x 3 trials and 3 points a week ship the
whole -21 points in 7 weeks more often than not (`bench/gate_power.py`). The drift here is the
newest gated run of each week against the oldest baseline the history's gates of its suite used
(production's run, when the baseline was pinned), on the tasks both played; the history warns
when it is significantly worse although every gate of the suite passed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from harness.compare import GradedEpisodes, TaskDifference, task_difference
from harness.gate.suites import run_suite, suite_id
from harness.stats import RunRate, at_most, run_rate
from harness.store import Store


@dataclass
class Drift:
    """The newest gated run of a week against the reference baseline, task by task."""

    reference: str  # the baseline run the drift is measured from
    run: str  # the week's newest gated candidate run
    difference: TaskDifference  # run - reference over the tasks both graded


@dataclass
class GateWeek:
    """The gate decisions on one variant's runs in one ISO week."""

    variant: str
    week: str  # e.g. 2026-W07
    decisions: int
    passed: int
    undecided: int
    rate: RunRate  # the week's gated candidate runs pooled by task, with its interval
    drift: Drift | None = None


@dataclass
class GateTrend:
    """Every week's figures, and the warnings the drift calls for."""

    weeks: list[GateWeek] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def gate_trend(store: Store, alpha: float = 0.05) -> GateTrend:
    """Per variant and week: the decisions, the pass rate of the gated runs with its interval
    (`run_rate`), and the drift of the week's newest gated run since the oldest baseline the
    gates of its suite used; a warning for each suite whose newest gated run drifted worse at
    `alpha` (one-sided sign-flip test over tasks) while every gate of the suite passed."""
    rows = [row for row in store.gate_history() if store.run(row["candidate_run"])]
    by_week: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    by_suite: dict[str, list[dict[str, Any]]] = defaultdict(list)
    reference: dict[str, str] = {}
    for row in rows:
        year, number, _ = datetime.fromisoformat(row["at"]).isocalendar()
        by_week[(row["variant"], f"{year}-W{number:02d}")].append(row)
        suite = _suite(store, row["candidate_run"])
        by_suite[suite].append(row)
        if row["baseline_run"] and store.run(row["baseline_run"]) is not None:
            reference.setdefault(suite, row["baseline_run"])
    loaded: dict[str, GradedEpisodes] = {}

    def graded(run_id: str) -> GradedEpisodes:
        if run_id not in loaded:
            loaded[run_id] = GradedEpisodes.load(store, run_id)
        return loaded[run_id]

    def drift_of(run_id: str) -> Drift | None:
        since = reference.get(_suite(store, run_id))
        if since is None or since == run_id:
            return None
        return _drift(graded(since), graded(run_id), alpha)

    trend = GateTrend()
    for (variant, week), group in sorted(by_week.items()):
        pooled: dict[str, list[bool]] = defaultdict(list)
        for run_id in dict.fromkeys(row["candidate_run"] for row in group):
            for task, trials in graded(run_id).graded_outcomes().items():
                pooled[task] += trials
        trend.weeks.append(
            GateWeek(
                variant=variant,
                week=week,
                decisions=len(group),
                passed=sum(bool(row["passed"]) for row in group),
                undecided=sum(decision_status(row) == "undecided" for row in group),
                rate=run_rate(pooled),
                drift=drift_of(group[-1]["candidate_run"]),
            )
        )
    for _, group in sorted(by_suite.items()):
        drift = drift_of(group[-1]["candidate_run"])
        if drift is not None and all(row["passed"] for row in group):
            d = drift.difference
            if d.difference < 0 and at_most(d.p_worse, alpha):
                trend.warnings.append(
                    f"run {drift.run} is {-d.difference * 100:.1f} points below "
                    f"{drift.reference} (95% CI {d.low:+.1%} to {d.high:+.1%} over {d.tasks} "
                    f"tasks, one-sided p = {d.p_worse:.4f}) although each of the suite's "
                    f"{len(group)} gate decisions passed: the steps add up. Gate against "
                    "production's run (harness baseline set once, then leave it pinned)"
                )
    return trend


def _suite(store: Store, run_id: str) -> str:
    info = store.run(run_id)
    assert info is not None  # only rows of stored runs are read
    return suite_id(run_suite(store, info))


def decision_status(row: dict[str, Any]) -> str:
    """pass, fail or undecided, from a row of the gate history: a decision that did not pass
    and whose every line was undecided (kept prefixed `undecided: `) was UNDECIDED."""
    if row["passed"]:
        return "pass"
    reasons = json.loads(row["reasons"])
    undecided = bool(reasons) and all(r.startswith("undecided: ") for r in reasons)
    return "undecided" if undecided else "fail"


def _drift(reference: GradedEpisodes, run: GradedEpisodes, alpha: float) -> Drift | None:
    before, after = reference.graded_outcomes(), run.graded_outcomes()
    common = before.keys() & after.keys()
    if not common:
        return None
    difference = task_difference(
        {t: before[t] for t in sorted(common)}, {t: after[t] for t in sorted(common)}, alpha
    )
    return Drift(reference.run_id, run.run_id, difference)

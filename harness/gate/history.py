"""The trend of the gate's decisions, from the history the store keeps."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from harness.store import Store


@dataclass
class GateWeek:
    """The gate decisions on one variant's runs in one ISO week."""

    variant: str
    week: str  # e.g. 2026-W07
    decisions: int
    passed: int
    mean_rate: float  # the candidates' mean pass rate
    first_rate: float
    last_rate: float


def gate_trend(store: Store) -> list[GateWeek]:
    """The pass-rate trend of gated runs from the gate history, per variant and week."""
    weeks: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in store.gate_history():
        year, week, _ = datetime.fromisoformat(row["at"]).isocalendar()
        weeks[(row["variant"], f"{year}-W{week:02d}")].append(row)
    trend = []
    for (variant, week), entries in sorted(weeks.items()):
        rates = [e["pass_rate"] for e in entries]
        passed = sum(e["passed"] for e in entries)
        mean_rate = sum(rates) / len(rates)
        trend.append(GateWeek(variant, week, len(entries), passed, mean_rate, rates[0], rates[-1]))
    return trend

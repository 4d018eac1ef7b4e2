"""What one report covers, whichever way the results came (a pipeline or the results store), so
that every format reads the same typed results."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.compare import ComparisonResult
from harness.gate import GateResult


@dataclass
class ReportedRun:
    """A stored run to summarise, with its tasks' levels for the tables."""

    run_id: str
    levels: dict[str, int] = field(default_factory=dict)  # task id -> level


@dataclass
class ReportContents:
    """Runs, comparisons and gate decisions of one report."""

    runs: list[ReportedRun] = field(default_factory=list)
    comparisons: list[ComparisonResult] = field(default_factory=list)
    gates: list[GateResult] = field(default_factory=list)

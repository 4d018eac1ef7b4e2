"""What flows along a pipeline's edges. Every output is JSON-storable (the node cache); results
themselves (episodes, verdicts) live in the results store and are referred to by run id."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from harness.compare import ComparisonResult
from harness.gate import GateResult
from harness.report.contents import ReportContents, ReportedRun
from harness.sim.suite import TaskCase
from harness.store import PlayedTask


def levels_of(cases: Sequence[PlayedTask]) -> dict[str, int]:
    """Task id -> level, for the tables of reports (tasks loaded, or read from the store)."""
    return {case.task.id: case.task.level for case in cases}


class NodeOutput(BaseModel):
    """Base of every node output."""

    model_config = ConfigDict(extra="forbid")


class Tasks(NodeOutput):
    """A loaded and cross-checked task set (the cases themselves are held in memory)."""

    task_ids: list[str] = Field(description="The tasks, in order.")
    content_hash: str = Field(description="Hash of everything that defines the tasks.")
    task_hashes: dict[str, str] = Field(
        default_factory=dict,
        description="Each task's content hash: a run records them as its suite, which the gate "
        "compares with its baseline's.",
    )
    source: dict[str, Any] = Field(description="How they were loaded (load_tasks parameters).")
    _cases: list[TaskCase] = PrivateAttr(default_factory=list)

    @property
    def cases(self) -> list[TaskCase]:
        return self._cases

    def with_cases(self, cases: list[TaskCase]) -> Self:
        self._cases = cases
        return self


class Run(NodeOutput):
    """One variant's episodes over a task set, stored under `run_id`."""

    run_id: str = Field(description="The run in the results store.")
    variant: str = Field(description="Agent variant name.")
    variant_hash: str = Field(description="Agent variant content hash.")
    episodes: int = Field(description="Episodes stored.")
    _cases: list[TaskCase] = PrivateAttr(default_factory=list)

    @property
    def cases(self) -> list[TaskCase]:
        return self._cases

    def with_cases(self, cases: list[TaskCase]) -> Self:
        self._cases = cases
        return self

    @property
    def levels(self) -> dict[str, int]:
        return levels_of(self.cases)


class Episodes(Run):
    """The output of `simulate`: transcripts stored, not yet graded by this pipeline. Announced
    to its followers as the run starts, with `episodes` the number it will have."""


class Graded(Run):
    """The output of `grade`: the run's episodes with verdicts."""

    counts: dict[str, int] = Field(description="Verdicts by outcome: pass, fail, error.")


class Comparison(NodeOutput):
    """The output of `compare`: variant B against variant A on the same tasks and trials."""

    a: Graded = Field(description="Variant A (the baseline side).")
    b: Graded = Field(description="Variant B (the candidate side).")
    result: ComparisonResult = Field(description="The paired comparison of B against A.")


class GateDecision(NodeOutput):
    """The output of `gate`: whether the candidate may replace the baseline, and why not."""

    candidate: Graded = Field(description="The run the gate judged.")
    result: GateResult = Field(description="The decision, every failed rule and the figures.")


class Fidelity(NodeOutput):
    """The output of `fidelity`: how far a run's simulated users behave like production's
    (the whole report is kept with the run in the results store)."""

    run_id: str = Field(description="The simulated run.")
    source: str = Field(description="The production sessions it was compared with.")
    index: float | None = Field(description="Fidelity index, 0..100.")
    interval: tuple[float, float] | None = Field(description="Its 95% bootstrap interval.")
    easy_mode: list[str] = Field(description="Dimensions where simulation is easy mode.")


class Report(NodeOutput):
    """The output of `report`: what it reported (for the caller to print at the end) and the
    files it wrote."""

    runs: list[Graded] = Field(default_factory=list, description="Runs summarised.")
    comparisons: list[Comparison] = Field(default_factory=list, description="Comparisons.")
    gates: list[GateDecision] = Field(default_factory=list, description="Gate decisions.")
    fidelity: list[Fidelity] = Field(
        default_factory=list, description="Sim-to-real reports (their runs are reported)."
    )
    files: list[str] = Field(default_factory=list, description="Files written.")

    def contents(self) -> ReportContents:
        """What the report covers, as every report format reads it."""
        graded = {run.run_id for run in self.runs}
        return ReportContents(
            runs=[ReportedRun(run.run_id, run.levels) for run in self.runs]
            + [ReportedRun(f.run_id) for f in self.fidelity if f.run_id not in graded],
            comparisons=[comparison.result for comparison in self.comparisons],
            gates=[gate.result for gate in self.gates],
        )


class WandbRun(NodeOutput):
    """The output of `log_wandb`: the W&B run that holds the metrics."""

    run_id: str = Field(description="W&B run id.")
    mode: str = Field(description="online, offline or disabled.")
    directory: str | None = Field(description="Local run directory, when written.")

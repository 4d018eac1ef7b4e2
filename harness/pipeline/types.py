"""What flows along a pipeline's edges. Every output is JSON-storable (the node cache); results
themselves (episodes, verdicts) live in the results store and are referred to by run id."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from harness.sim.suite import TaskCase


class NodeOutput(BaseModel):
    """Base of every node output."""

    model_config = ConfigDict(extra="forbid")


class Tasks(NodeOutput):
    """A loaded and cross-checked task set (the cases themselves are held in memory)."""

    task_ids: list[str] = Field(description="The tasks, in order.")
    content_hash: str = Field(description="Hash of everything that defines the tasks.")
    source: dict[str, Any] = Field(description="How they were loaded (load_tasks parameters).")
    _cases: list[TaskCase] = PrivateAttr(default_factory=list)

    @property
    def cases(self) -> list[TaskCase]:
        return self._cases

    def with_cases(self, cases: list[TaskCase]) -> Tasks:
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

    def with_cases(self, cases: list[TaskCase]) -> Run:
        self._cases = cases
        return self


class Episodes(Run):
    """The output of `simulate`: transcripts stored, not yet graded by this pipeline."""


class Graded(Run):
    """The output of `grade`: the run's episodes with verdicts."""

    counts: dict[str, int] = Field(description="Verdicts by outcome: pass, fail, error.")


class Comparison(NodeOutput):
    """The output of `compare`: variant B against variant A on the same tasks and trials."""

    a: Graded = Field(description="Variant A (the baseline side).")
    b: Graded = Field(description="Variant B (the candidate side).")
    result: dict[str, Any] = Field(description="The comparison (see harness.compare).")


class GateDecision(NodeOutput):
    """The output of `gate`: whether the candidate may replace the baseline, and why not."""

    passed: bool = Field(description="True when no rule of the gate failed.")
    reasons: list[str] = Field(description="Every rule that failed, one line each.")
    candidate: Graded = Field(description="The run the gate judged.")
    baseline_run: str | None = Field(description="The run it was compared with.")
    result: dict[str, Any] = Field(description="Details (see harness.gate).")


class Report(NodeOutput):
    """The output of `report`: what it reported (printed by the command line at the end) and
    the files it wrote."""

    runs: list[Graded] = Field(default_factory=list, description="Runs summarised.")
    comparisons: list[Comparison] = Field(default_factory=list, description="Comparisons.")
    gates: list[GateDecision] = Field(default_factory=list, description="Gate decisions.")
    files: list[str] = Field(default_factory=list, description="Files written.")


class WandbRun(NodeOutput):
    """The output of `log_wandb`: the W&B run that holds the metrics."""

    run_id: str = Field(description="W&B run id.")
    mode: str = Field(description="online, offline or disabled.")
    directory: str | None = Field(description="Local run directory, when written.")

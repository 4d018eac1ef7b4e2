"""The machine-readable summary of `--json`: one object per command, built from the same figures
and results as the terminal tables, so a script reads what a person reads."""

from __future__ import annotations

from pydantic import BaseModel, Field

from harness.compare import ComparisonResult
from harness.gate import GateResult
from harness.report.summary import RunFigures, run_figures
from harness.store import Store
from harness.transcript import Usage


class RunSummary(BaseModel):
    """One run's figures, as the terminal summary prints them."""

    run_id: str = Field(description="The run in the results store.")
    variant: str = Field(description="Agent variant name.")
    variant_hash: str = Field(description="Agent variant content hash.")
    episodes: int = Field(description="Episodes stored, graded or not.")
    passed: int = Field(description="Episodes that passed.")
    graded: int = Field(description="Episodes graded pass or fail (errors are not counted).")
    pass_rate: float | None = Field(
        description="The mean of the per-task pass rates (passed / graded when every task has "
        "as many graded trials); null when none was graded."
    )
    tasks: int = Field(default=0, description="Tasks graded: the unit of the interval.")
    low: float = Field(description="Lower end of the pass rate's 95% interval, clustered by task.")
    high: float = Field(description="Upper end of the same interval.")
    interval: str = Field(default="", description="How the interval was computed.")
    trials: int = Field(description="Fewest graded trials of a task.")
    errors: int = Field(description="Episodes graded error: evidence of neither pass nor fail.")
    errors_by_side: dict[str, int] = Field(description="Errors by the side that failed.")
    too_many_errors: bool = Field(
        default=False,
        description="More episodes errored than a gate accepts (harness.defaults.MAX_ERROR_RATE):"
        " the pass rate is no result, and the command exits non-zero.",
    )
    soft_errors_by_side: dict[str, int] = Field(
        description="Episodes whose verdict stands while a soft check could not decide, by side."
    )
    agent_usage: Usage = Field(description="The agent's model calls, tokens and cost.")
    user_usage: Usage = Field(description="The simulated user's model calls, tokens and cost.")
    judge_usage: Usage = Field(
        default_factory=Usage, description="The judges' model calls, tokens and cost."
    )
    cost_usd: float = Field(description="Agent, simulated user and judges together, in US dollars.")

    @classmethod
    def of(cls, figures: RunFigures) -> RunSummary:
        errors = sum(figures.errors_by_side.values())
        return cls(
            run_id=figures.run_id,
            variant=figures.variant,
            variant_hash=figures.variant_hash,
            episodes=figures.episodes,
            passed=figures.passed,
            graded=figures.graded,
            pass_rate=figures.rate if figures.graded else None,
            tasks=figures.pass_rate.tasks,
            low=figures.low,
            high=figures.high,
            interval=figures.pass_rate.method,
            trials=figures.trials,
            errors=errors,
            errors_by_side=dict(figures.errors_by_side),
            too_many_errors=figures.too_many_errors,
            soft_errors_by_side=dict(figures.soft_errors_by_side),
            agent_usage=figures.usage,
            user_usage=figures.user_usage,
            judge_usage=figures.judge_usage,
            cost_usd=figures.cost_usd,
        )


class ResultsSummary(BaseModel):
    """What `run-eval`, `compare` and `gate` print with `--json`: the runs, the comparisons and
    the gate decisions, and the pipeline that made them when one ran."""

    pipeline_id: str | None = Field(default=None, description="The pipeline execution, if any.")
    name: str | None = Field(default=None, description="The pipeline's name, if any.")
    nodes: dict[str, str] = Field(
        default_factory=dict, description="Each node's state: ran, reused, failed or skipped."
    )
    node_errors: dict[str, str] = Field(
        default_factory=dict, description="Why each failed node failed."
    )
    runs: list[RunSummary] = Field(default_factory=list, description="Each run's summary.")
    comparisons: list[ComparisonResult] = Field(
        default_factory=list, description="Each comparison of two runs."
    )
    gates: list[GateResult] = Field(default_factory=list, description="Each gate decision.")
    passed: bool | None = Field(
        default=None,
        description="No gate blocks (every gate passed, or is UNDECIDED under on_undecided: "
        "warn); null when no gate decided.",
    )
    files: list[str] = Field(default_factory=list, description="Report files written.")


def results_summary(
    store: Store,
    run_ids: list[str],
    comparisons: list[ComparisonResult] | None = None,
    gates: list[GateResult] | None = None,
    files: list[str] | None = None,
) -> ResultsSummary:
    """The summary of some stored runs and of the decisions taken on them."""
    gates = gates or []
    return ResultsSummary(
        runs=[RunSummary.of(run_figures(store, run_id)) for run_id in dict.fromkeys(run_ids)],
        comparisons=comparisons or [],
        gates=gates,
        passed=not any(gate.blocks for gate in gates) if gates else None,
        files=files or [],
    )

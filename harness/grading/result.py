"""The uniform result of one check, and a task's verdict built from them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.transcript import Side, Usage

Outcome = Literal["pass", "fail", "error"]


@dataclass(frozen=True)
class Finding:
    """What a check handler decided: the uniform shape every check kind returns."""

    outcome: Outcome
    reason: str
    score: float | None = None  # None: 1 for a pass, 0 otherwise
    error_side: Side = Side.CHECKER  # who failed, when the outcome is an error
    sandbox: str | None = None  # where checker code ran (docker, bwrap, subprocess)
    limits: str | None = None  # how the sandbox's limits were enforced (cgroup v1, rlimit...)
    usage: Usage | None = None  # model calls the check made (a judge's), when any replied


class CheckResult(BaseModel):
    """What one check found. `error` means the check could not decide (never a fail)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The check's label.")
    kind: str = Field(description="The check kind.")
    outcome: Outcome = Field(description="pass, fail, or error when the check could not decide.")
    score: float = Field(
        default=0.0, ge=0, le=1, description="1 for a pass, 0 for a fail, or the graded score."
    )
    reason: str = Field(default="", description="Why, in one line.")
    error_side: Side | None = Field(
        default=None, description="For an error: checker (rule or code) or judge."
    )
    hard: bool = Field(default=True, description="Copied from the check spec.")
    weight: float = Field(default=1.0, description="Copied from the check spec.")
    diagnostic: bool = Field(default=False, description="Copied from the check spec.")
    sandbox: str | None = Field(
        default=None,
        description="Where checker code ran: docker, bwrap, or subprocess (no boundary).",
    )
    sandbox_limits: str | None = Field(
        default=None,
        description="How the sandbox bounded the checker as a whole: 'cgroup v2' or 'cgroup v1' "
        "(memory, processes and CPU of every process together), 'rlimit' (a process cap and a "
        "per-process share of the memory), 'docker' (the container's), or 'none'.",
    )
    usage: Usage | None = Field(
        default=None,
        description="Usage of the model calls the check made (an LLM judge's, retries and "
        "unparseable replies included); None when it called no model or none replied.",
    )

    @property
    def gates(self) -> bool:
        return self.hard and not self.diagnostic

    @property
    def undecided(self) -> bool:
        """A soft check that could not decide (see `Verdict.soft_errors`)."""
        return not self.hard and not self.diagnostic and self.outcome == "error"


class Verdict(BaseModel):
    """A task's grade for one episode."""

    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(description="The task.")
    trial: int = Field(default=0, description="The trial.")
    outcome: Outcome = Field(description="pass, fail, or error (excluded from pass rates).")
    score: float = Field(default=0.0, description="Weighted score of the non-diagnostic checks.")
    error_side: Side | None = Field(default=None, description="Which side failed, for an error.")
    reason: str = Field(default="", description="Summary of what decided the outcome.")
    checks: list[CheckResult] = Field(default_factory=list, description="Every check's result.")

    def failed_checks(self) -> list[CheckResult]:
        """Gating checks that did not pass."""
        return [c for c in self.checks if c.gates and c.outcome != "pass"]

    def soft_errors(self) -> list[CheckResult]:
        """Soft checks that could not decide: they leave the outcome alone (soft checks decide
        nothing), so reports and the gate name them without counting them as errors."""
        return [c for c in self.checks if c.undecided]

    def judge_usage(self) -> Usage:
        """The usage of every model call made to grade the episode (its checks' judges),
        summed; an empty usage when no check called a model."""
        total = Usage()
        for check in self.checks:
            if check.usage is not None:
                total.add(check.usage)
        return total

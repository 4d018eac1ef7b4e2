"""The figures behind a gate decision, as typed models: every rule's outcome, each run's
errors, the level floors, the budgets and the suites compared."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator


class RuleCheck(BaseModel):
    """One rule of the gate: passed, failed or undecided, with the figures that decided it."""

    rule: str = Field(description="The rule's name, e.g. 'errors', 'level 1', 'cost budget'.")
    passed: bool = Field(description="True only when the rule passed.")
    status: Literal["pass", "fail", "undecided"] = Field(
        default="pass",
        description="undecided: the evidence cannot decide this rule (too few tasks or trials "
        "for even the most extreme outcome to be significant, or missing evidence that would "
        "fail it if counted against the candidate); its line says what would decide it. An "
        "undecided rule makes the gate UNDECIDED, never a pass.",
    )
    detail: str = Field(description="One line with the figures; the reason when it failed.")
    p_value: float | None = Field(
        default=None, description="A statistical rule's smallest p-value among its tests."
    )
    adjusted_p: float | None = Field(
        default=None,
        description="That test's p-value adjusted for the gate's family of tests (discrete "
        "Bonferroni): the rule fails when it is at most alpha.",
    )

    @model_validator(mode="after")
    def _failed(self) -> RuleCheck:
        """A rule that did not pass has failed, unless it says it is undecided."""
        if not self.passed and self.status == "pass":
            self.status = "fail"
        self.passed = self.status == "pass"
        return self


class LevelFigures(BaseModel):
    """The candidate's pass rate on the tasks of one level, against that level's floor."""

    rate: float = Field(description="Mean of the level's per-task pass rates.")
    n: int = Field(description="Graded episodes of the level.")
    tasks: int = Field(default=0, description="Graded tasks of the level: the interval's unit.")
    low: float = Field(description="Lower end of the 95% interval, clustered by task.")
    high: float = Field(description="Upper end of the 95% interval, clustered by task.")
    floor: float = Field(description="The lowest pass rate the gate allows.")


class BudgetFigures(BaseModel):
    """The candidate's spend, measured against the gate's budgets."""

    cost_usd_per_episode: float = Field(
        description="Mean cost per episode: agent, simulated user and judge calls."
    )
    agent_cost_usd_per_episode: float = Field(
        default=0.0, description="Mean cost per episode of the agent's model calls."
    )
    user_cost_usd_per_episode: float = Field(
        default=0.0, description="Mean cost per episode of the simulated user's model calls."
    )
    judge_cost_usd_per_episode: float = Field(
        default=0.0, description="Mean cost per episode of the judges' model calls."
    )
    latency_s_p95: float = Field(description="95th-percentile episode wall time in seconds.")
    unpriced_models: list[str] = Field(
        default_factory=list,
        description="Models the candidate called that have no price: their calls count as $0.",
    )


class RunErrors(BaseModel):
    """The episodes of one compared run that carry no complete evidence."""

    run_id: str = Field(description="The run in the results store.")
    role: Literal["candidate", "baseline"] = Field(description="Its side of the comparison.")
    episodes: int = Field(description="Episodes stored for the gated tasks.")
    errors: int = Field(description="Episodes whose verdict is an error.")
    ungraded: int = Field(description="Episodes without a verdict.")
    soft_errors: int = Field(
        description="Episodes that passed while a soft check could not decide."
    )
    by_side: dict[str, int] = Field(
        default_factory=dict,
        description="Errors and soft-check errors by the side that failed (agent, judge, ...).",
    )
    rate: float = Field(
        description="(errors + ungraded) / episodes; soft errors are reported, not counted."
    )


class SuiteFigures(BaseModel):
    """How the two runs' task sets (ids and content hashes) compare."""

    same: bool = Field(description="Same task ids with the same content hashes.")
    common: list[str] = Field(description="Tasks both runs played in the same content.")
    only_baseline: list[str] = Field(default_factory=list, description="Only the baseline's.")
    only_candidate: list[str] = Field(default_factory=list, description="Only the candidate's.")
    changed: list[str] = Field(
        default_factory=list, description="Same id, different content: left out."
    )


class EvidenceRound(BaseModel):
    """One round of episodes the gate played before deciding (`harness.gate.evidence`)."""

    round: int = Field(description="The round, from 1.")
    candidate_run: str | None = Field(
        default=None, description="The run holding the candidate's new episodes, if any."
    )
    baseline_run: str | None = Field(
        default=None, description="The run holding the baseline's new episodes, if any."
    )
    candidate_episodes: int = Field(default=0, description="Candidate episodes played.")
    baseline_episodes: int = Field(default=0, description="Baseline episodes played.")
    why: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Task -> why it was played: top-up (a side held fewer trials), replay (an "
        "episode without evidence), regression (a regression-tagged task declined).",
    )

"""The CI regression gate's thresholds."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from harness import defaults
from harness.specs.base import Spec
from harness.stats.family import fewest_for_fisher


class Budgets(Spec):
    """Cost and latency ceilings of the candidate run."""

    cost_usd_per_episode: float | None = Field(
        default=None,
        ge=0,
        description="Most mean cost per episode in US dollars. It cannot pass while a model "
        "the candidate called has no price (its calls would count as $0).",
    )
    latency_s_p95: float | None = Field(
        default=None, gt=0, description="Most 95th-percentile episode wall time in seconds."
    )


class Gate(Spec):
    """When a candidate run may not replace the baseline."""

    kind: Literal["gate"] = Field(description="File kind.")
    alpha: float = Field(
        default=0.05,
        gt=0,
        lt=1,
        description="The gate's false-failure rate: the most chance that a candidate identical "
        "to the baseline fails any of its statistical rules together (worse than the baseline, "
        "each regression-tagged task, each level and tag floor), shared among them by the "
        "discrete Bonferroni procedure.",
    )
    max_error_rate: float = Field(
        default=defaults.MAX_ERROR_RATE,
        ge=0,
        le=1,
        description="Most share of a compared run's episodes (candidate and baseline each) "
        "still without a verdict after the gate played them again: error verdicts and "
        "ungraded episodes (a pass whose soft check could not decide is reported, not counted: "
        "soft checks decide nothing). Within it, what stays missing is read both ways: a rule "
        "it could change is undecided.",
    )
    min_tasks: int = Field(
        default=5,
        ge=1,
        description="Fewest tasks graded on both sides (on the candidate alone without a "
        "baseline). Below 5 tasks a one-sided task-level test at 0.05 can never find a drop.",
    )
    level_floors: dict[Annotated[int, Field(ge=1, le=3)], Annotated[float, Field(ge=0, le=1)]] = (
        Field(
            default_factory=dict,
            description="Lowest pass rate allowed per task level, e.g. {1: 0.9}. A level fails "
            "when its rate is significantly below the floor (the upper end of its interval, at "
            "the gate's shared alpha), not when the point estimate dips under it.",
        )
    )
    tag_floors: dict[str, Annotated[float, Field(ge=0, le=1)]] = Field(
        default_factory=dict,
        description="Lowest pass rate allowed for the tasks with a tag, e.g. {safety: 0.95}; "
        "tested like the level floors.",
    )
    regression_tags: list[str] = Field(
        default_factory=lambda: ["regression"],
        description="Tasks with these tags may not regress: each is tested on its own (a "
        "one-sided Fisher exact test of its trials on both sides, within the gate's alpha), so "
        "improvements on other tasks never hide a broken one. A tagged task that declined is "
        "played again on both sides up to `max_trials` before the gate decides: a task that "
        "passed every trial and fails every one fails the gate (8 trials a side: p = "
        "1/12870); at 3 trials a side it could not (p = 1/20 before the other rules' share).",
    )
    max_trials: int = Field(
        default=defaults.GATE_MAX_TRIALS,
        ge=1,
        le=100,
        description="Most trials per task and side the gate may hold when it decides, the "
        "runs' own included. When a rule cannot decide yet (a regression-tagged task declined, "
        "or on too few trials passed none; episodes without evidence that could change the "
        "decision; fewer trials on one side), the gate plays more trials of just the tasks that "
        "need them, on both sides, up to this, before it decides once on everything. Playing "
        "needs the runs' agents (loaded from the stored variant, or given); what is still "
        "undecided is UNDECIDED, never a pass.",
    )
    on_undecided: Literal["fail", "warn"] = Field(
        default="fail",
        description="What an UNDECIDED gate does: `fail` exits 1 and fails its JUnit case, as a "
        "failed gate does; `warn` exits 0 and says so in its first line and every report.",
    )
    min_judge_kappa: float | None = Field(
        default=None,
        ge=-1,
        le=1,
        description="When set, llm_judge verdicts count only from a judge whose newest "
        "calibration against human feedback (`harness judge calibrate --store`) holds "
        "at least `min_judge_sessions` labelled sessions and whose Cohen's kappa's 95% interval "
        "has its lower end at least this: a compared run graded by hard llm_judge checks of an "
        "uncalibrated judge, one calibrated on too few sessions, or one whose interval reaches "
        "below it fails the gate ('judge agreement'). The lower end is a one-sided 97.5% bound, "
        "so a judge whose true kappa is below the floor rarely passes, whatever the number of "
        "sessions (bench/judge_calibration.py). A condition on the instrument, not a test of "
        "the candidate: it spends none of the gate's alpha.",
    )
    min_judge_sessions: int = Field(
        default=defaults.MIN_JUDGE_SESSIONS,
        ge=1,
        description="Fewest labelled sessions a judge's calibration must hold for "
        "`min_judge_kappa` to be checked on it; fewer is a failed 'judge agreement' rule.",
    )
    budgets: Budgets = Field(default_factory=Budgets, description="Cost and latency budgets.")
    junit: str | None = Field(default=None, description="Where to write JUnit XML.")
    markdown: str | None = Field(default=None, description="Where to write the Markdown summary.")

    @model_validator(mode="after")
    def _trials_can_show_a_break(self) -> Gate:
        """A budget of trials under which no regression task could ever fail is a gate that
        certifies every regression: refused where it is written."""
        fewest = fewest_for_fisher(self.alpha)
        if self.max_trials < fewest:
            raise ValueError(
                f"max_trials {self.max_trials} can never show a regression task's break at alpha "
                f"{self.alpha:g} (a task passing every trial, then failing every one, needs "
                f"{fewest} trials a side); use at least {fewest}"
            )
        return self

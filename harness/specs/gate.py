"""The CI regression gate's thresholds."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from harness import defaults
from harness.specs.base import Spec


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
        "without a verdict: error verdicts and ungraded episodes (a pass whose soft check "
        "could not decide is reported, not counted: soft checks decide nothing). Any error on "
        "a hard check of a regression-tagged task fails the gate whatever this is.",
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
        "one-sided Fisher exact test of its trials on both sides, within the gate's alpha). "
        "With fewer than 3 trials per side one task's regression cannot be significant at "
        "0.05 and the rule says so.",
    )
    min_judge_kappa: float | None = Field(
        default=None,
        ge=-1,
        le=1,
        description="When set, llm_judge verdicts count only from a judge whose newest "
        "calibration against human feedback (`harness judge calibrate --results-store`) has "
        "Cohen's kappa at least this: a compared run graded by hard llm_judge checks of an "
        "uncalibrated judge, or one below it, fails the gate ('judge agreement'). A condition "
        "on the instrument, not a test of the candidate: it spends none of the gate's alpha.",
    )
    budgets: Budgets = Field(default_factory=Budgets, description="Cost and latency budgets.")
    junit: str | None = Field(default=None, description="Where to write JUnit XML.")
    markdown: str | None = Field(default=None, description="Where to write the Markdown summary.")

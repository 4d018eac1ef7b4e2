"""The CI regression gate's thresholds."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

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
        description="Significance level of the one-sided paired test over tasks (sign-flip "
        "permutation test of the per-task pass-rate differences) that the candidate is worse.",
    )
    max_error_rate: float = Field(
        default=0.05,
        ge=0,
        le=1,
        description="Most share of a compared run's episodes (candidate and baseline each) "
        "without evidence: error verdicts, ungraded episodes and passes whose soft check could "
        "not decide. Any error on a hard check of a regression-tagged task fails the gate "
        "whatever this is.",
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
            description="Lowest pass rate allowed per task level, e.g. {1: 0.9}.",
        )
    )
    regression_tags: list[str] = Field(
        default_factory=lambda: ["regression"],
        description="Tasks with these tags must not go from passing to failing in every trial.",
    )
    budgets: Budgets = Field(default_factory=Budgets, description="Cost and latency budgets.")
    junit: str | None = Field(default=None, description="Where to write JUnit XML.")
    markdown: str | None = Field(default=None, description="Where to write the Markdown summary.")

"""The CI regression gate's thresholds."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from harness.specs.base import Spec


class Budgets(Spec):
    """Cost and latency ceilings of the candidate run."""

    cost_usd_per_episode: float | None = Field(
        default=None, ge=0, description="Most mean cost per episode in US dollars."
    )
    latency_s_p95: float | None = Field(
        default=None, gt=0, description="Most 95th-percentile episode wall time in seconds."
    )


class Gate(Spec):
    """When a candidate run may not replace the baseline."""

    kind: Literal["gate"] = Field(description="File kind.")
    alpha: float = Field(
        default=0.05, gt=0, lt=1, description="Significance level of the paired regression test."
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

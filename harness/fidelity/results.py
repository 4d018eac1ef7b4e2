"""The sim-to-real report's models: each dimension's two distributions and agreement, the
populations' shares, the outcome calibration and the fidelity index."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Distribution(BaseModel):
    """One side's values of a dimension."""

    model_config = ConfigDict(extra="forbid")

    sessions: int = Field(description="Sessions with a value.")
    mean: float | None = Field(description="Mean (for a yes/no dimension, the rate).")
    p10: float | None = Field(description="10th percentile.")
    median: float | None = Field(description="Median.")
    p90: float | None = Field(description="90th percentile.")


class DimensionAgreement(BaseModel):
    """A dimension compared between simulated and production users."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The dimension (a `SessionBehaviour` field).")
    family: str = Field(description="Its family (`FAMILIES`).")
    simulated: Distribution = Field(description="The run's simulated users.")
    production: Distribution = Field(description="Production's users.")
    agreement: float | None = Field(
        description="1 - the bias-corrected Kolmogorov-Smirnov distance (can exceed 1 by "
        "noise when the two sides agree); None when left out."
    )
    plug_in: float | None = Field(
        default=None,
        description="1 - the plug-in Kolmogorov-Smirnov distance of the two samples, biased "
        "low by their noise (None: left out, or a report from before the correction).",
    )
    noise: float | None = Field(
        default=None,
        description="The distance two samples of identical users show on average at these "
        "sizes (the bootstrap's estimate; what the correction subtracts at most).",
    )
    difference: float | None = Field(description="Simulated mean - production mean.")
    difference_interval: tuple[float, float] | None = Field(
        description="Its 95% bootstrap interval (production sessions, simulated tasks)."
    )
    easy_mode: bool = Field(description="Simulation is easier than production here.")
    note: str = Field(default="", description="Why it is left out, or how it is easy mode.")


class OutcomeRow(BaseModel):
    """One task made from production traces: what production saw and what the run did."""

    task_id: str
    kind: str = Field(description="`success` or `failure`: the production outcome.")
    sessions: int = Field(description="Production sessions the task stands for.")
    simulated_pass: float = Field(description="Share of its graded episodes that passed.")
    graded: int = Field(description="Its graded episodes (errors left out).")


class OutcomeCalibration(BaseModel):
    """The simulated pass rate against production's outcome on the same sessions."""

    tasks: int = Field(description="Tasks made from production with graded episodes.")
    sessions: int = Field(description="Production sessions they stand for.")
    production_success: float = Field(description="Share of those sessions that succeeded.")
    simulated_pass: float = Field(description="The run's pass rate, weighted the same.")
    gap: float = Field(description="simulated_pass - production_success (> 0: optimistic).")
    gap_interval: tuple[float, float] = Field(description="95% bootstrap interval over tasks.")
    rows: list[OutcomeRow] = Field(default_factory=list)


class PopulationShare(BaseModel):
    """One population of production's users (a profile, as `personas from-traces` finds them)
    and the share of the simulated users nearest to it."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The profile's name (how it discloses, how it reacts, ...).")
    production_share: float = Field(description="Its share of the production sessions.")
    simulated_share: float = Field(description="Share of the simulated sessions nearest to it.")
    production_sessions: int = Field(description="Its production sessions.")
    simulated_sessions: int = Field(description="The simulated sessions nearest to it.")


class FidelityReport(BaseModel):
    """`harness fidelity`: a run's simulated users against production's."""

    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(default="", description="The simulated run.")
    source: str = Field(default="", description="The production source.")
    simulated_sessions: int = Field(description="The run's episodes measured.")
    simulated_tasks: int = Field(description="Their tasks (the simulated bootstrap clusters).")
    production_sessions: int = Field(description="Production sessions measured.")
    left_out: int = Field(default=0, description="Episodes left out (harness errors, no turn).")
    index: float | None = Field(
        description="Fidelity index, 0..100, bias-corrected: 100 x `coverage` x the mean over "
        "families of their dimensions' agreement. A simulator identical to production reads "
        "100 on average, a little above 100 by noise (None: nothing comparable)."
    )
    interval: tuple[float, float] | None = Field(
        description="Its 95% percentile bootstrap interval (coverage measured by "
        "bench/fidelity.py)."
    )
    plug_in_index: float | None = Field(
        default=None,
        description="The index from plug-in distances, biased low by sampling noise (None in "
        "a report from before the correction).",
    )
    coverage: float | None = Field(
        default=None,
        description="Share of production's traffic whose population the simulated users play: "
        "1 - the total variation distance between the populations' production shares and the "
        "shares of simulated sessions nearest to each, bias-corrected (None: no population, "
        "or a report from before populations were compared).",
    )
    populations: list[PopulationShare] = Field(
        default_factory=list, description="Production's populations, largest first."
    )
    covers: str = Field(description="What the interval covers.")
    families: dict[str, float | None] = Field(
        description="Each family's mean agreement over all sessions."
    )
    dimensions: list[DimensionAgreement] = Field(description="Every dimension, in order.")
    easy_mode: list[str] = Field(description="The easy-mode dimensions.")
    outcome: OutcomeCalibration | None = Field(
        default=None, description="On tasks made from production traces, when the run has any."
    )

"""A hill climb: which parts of the production variant may change, what the reflection model
learns from, how much it may spend, and the rule a candidate must pass to ship."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from harness.defaults import MAX_TRIALS
from harness.specs.agent import ModelRef
from harness.specs.base import Spec
from harness.specs.wandb import WandbTarget

Tunable = Literal["temperature", "max_tokens", "max_tool_steps"]


class Components(Spec):
    """The parts of the variant a candidate may change; everything else stays production's."""

    system_prompt: bool = Field(default=False, description="The base system prompt may change.")
    skills: list[str] = Field(
        default_factory=list,
        description="Named skills that may change; a name production lacks starts empty, so "
        "the climb may add it.",
    )
    tool_descriptions: list[str] = Field(
        default_factory=list,
        description="Tools whose description (as the model reads it) may change; each starts "
        "from production's description of it, else the domain's docstring.",
    )
    parameters: dict[Tunable, tuple[float, float]] = Field(
        default_factory=dict,
        description="Numeric parameters that may change, each with its allowed [low, high] "
        "range; a proposal outside the range is refused.",
    )

    @model_validator(mode="after")
    def _something(self) -> Components:
        if not (self.system_prompt or self.skills or self.tool_descriptions or self.parameters):
            raise ValueError("name at least one component that may change")
        for name, (low, high) in self.parameters.items():
            if low > high:
                raise ValueError(f"parameters.{name}: the range's low end is above its high end")
        return self


class Selection(Spec):
    """Tasks chosen by id, tag or level (any that matches)."""

    ids: list[str] = Field(default_factory=list, description="These task ids.")
    tags: list[str] = Field(default_factory=list, description="Tasks with one of these tags.")
    levels: list[int] = Field(default_factory=list, description="Tasks of these levels.")


class ClimbTasks(Spec):
    """The tasks, and how they split into a train part (reflected on) and a held-out validation
    part (acceptance only)."""

    paths: list[str] = Field(min_length=1, description="Task files or folders.")
    personas: str | None = Field(default=None, description="Personas folder (default: nearest).")
    train: Selection | None = Field(
        default=None,
        description="The train split; otherwise a seeded random split (stratified by failure "
        "cluster for tasks made from production).",
    )
    validation: Selection | None = Field(
        default=None, description="The validation split; by default every task not in train."
    )
    validation_fraction: float = Field(
        default=0.5, gt=0, lt=1, description="Share of the tasks held out, for a random split."
    )
    seed: int = Field(default=0, description="Seed of the random split.")
    regression_tags: list[str] = Field(
        default_factory=lambda: ["regression"],
        description="Tasks with these tags are always in validation, never reflected on (but "
        "for tasks made from production, see `split_production`).",
    )
    split_production: bool = Field(
        default=True,
        description="Tasks made by `harness traces to-tasks` (a `source` block; all tagged "
        "regression) are split, stratified by failure cluster (what went wrong and at which "
        "step: the first two parts of `source.signature`), so the climb learns from "
        "production's failures and is accepted on others; false holds them out like other "
        "regression tasks.",
    )


class Budget(Spec):
    """When the search stops, whichever limit comes first."""

    episodes: int = Field(default=200, ge=1, description="Most episodes the search may play.")
    usd: float | None = Field(
        default=None, gt=0, description="Most US dollars for the search (episodes and reflection)."
    )
    minutes: float | None = Field(default=None, gt=0, description="Most wall time of the search.")
    candidates: int | None = Field(default=None, ge=1, description="Most candidates proposed.")


class Climb(Spec):
    """`harness climb CONFIG`: propose variants from failing transcripts, ship only proven wins."""

    kind: Literal["climb"] = Field(description="File kind.")
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="Name of the climb.")
    production: str = Field(description="The production variant file (relative to this file).")
    overrides: list[str] = Field(
        default_factory=list,
        alias="set",
        description="Overrides applied to production and every candidate, `PATH=VALUE` (e.g. "
        "the model every variant runs on).",
    )
    components: Components = Field(description="What may change.")
    reflection_model: ModelRef = Field(
        description="The model that reads failing transcripts and proposes new text."
    )
    judge_model: ModelRef | None = Field(
        default=None,
        description="Model of llm_judge checks that name none (default: the project file's "
        "`judge_model`; with none, a climb whose tasks need a judge stops before it plays).",
    )
    tasks: ClimbTasks = Field(description="The tasks and their train/validation split.")
    trials: int = Field(
        default=1, ge=1, le=MAX_TRIALS, description="Episodes per task and variant."
    )
    minibatch: int = Field(
        default=3, ge=1, description="Train tasks a proposal is tried on before the full train set."
    )
    budget: Budget = Field(default_factory=Budget, description="When the search stops.")
    gate: str = Field(
        default="ci/gate.yaml",
        description="The gate a candidate must pass against production on the validation "
        "tasks (relative to this file); it must also be better at the gate's alpha.",
    )
    out: str = Field(
        default="agents", description="Folder (relative to this file) of the accepted variant."
    )
    seed: int = Field(default=0, description="Seed of the search.")
    wandb: WandbTarget = Field(
        default_factory=WandbTarget,
        description="The W&B run the climb is logged to (offline unless `mode` or $WANDB_MODE "
        "says otherwise; `disabled` for none).",
    )

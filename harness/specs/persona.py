"""A simulated user: who they are and how they speak. The task says what they want."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from harness.specs.agent import ModelRef
from harness.specs.base import Spec
from harness.specs.script import Rule


class Persona(Spec):
    """A simulated user persona, played by an LLM or, for exact tests, by scripted turns."""

    kind: Literal["persona"] = Field(default="persona", description="File kind.")
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", description="Name tasks refer to.")
    description: str = Field(default="", description="Who this user is.")
    traits: list[str] = Field(default_factory=list, description="Personality traits to play.")
    style: str = Field(default="", description="How the user writes (length, tone, spelling).")
    patience: int = Field(default=8, ge=1, description="Agent turns before the user gives up.")
    model: ModelRef = Field(
        default_factory=lambda: ModelRef(id="scripted"),
        description="Model that plays the user, e.g. 'openai/gpt-4.1-mini' or 'local/smollm2'; "
        "'scripted' plays `scripted_turns` instead (switch a whole run with "
        "`--set persona.model=...`).",
    )
    temperature: float = Field(default=0.7, ge=0, le=2, description="Sampling temperature.")
    scripted_turns: list[Rule] = Field(
        default_factory=list,
        description="Deterministic replies chosen by rules on the agent's last message; "
        "templates may use `{known.KEY}` from the task's scenario.",
        validate_default=True,
    )

    @field_validator("scripted_turns")
    @classmethod
    def _scripted_needs_turns(cls, turns: list[Rule], info: ValidationInfo) -> list[Rule]:
        model = info.data.get("model")
        if model is not None and model.id == "scripted" and not turns:
            raise ValueError("model 'scripted' needs scripted_turns")
        return turns

"""The parameters of each check kind a task can list. Grading handlers live in `harness.grading`.

Each kind is one model with a `kind` literal; `Check` is their discriminated union. A check that
could never fail (an empty criterion) is rejected here so it can never auto-pass a task.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from harness.specs.base import Spec


class CheckBase(Spec):
    """Fields every check kind shares: how its result counts towards the task's verdict."""

    name: str | None = Field(default=None, description="Short label shown in reports.")
    hard: bool = Field(
        default=True,
        description="A hard check must pass for the task to pass; a soft one only adds to "
        "the score.",
    )
    weight: float = Field(default=1.0, ge=0, description="Weight of a soft check in the score.")
    diagnostic: bool = Field(
        default=False, description="Reported for information only; never affects the verdict."
    )

    @property
    def gates(self) -> bool:
        """Whether this check can decide a verdict."""
        return self.hard and not self.diagnostic

    def label(self) -> str:
        """A readable name for reports."""
        return self.name or self.kind  # type: ignore[attr-defined]


class StateCheck(CheckBase):
    """The final environment state contains the expected values (a partial, recursive match)."""

    kind: Literal["state"]
    expect: dict[str, Any] = Field(
        description=(
            "Partial expected state: every key given must be present with an equal value; "
            "nested mappings match recursively, lists must be equal."
        )
    )

    @field_validator("expect")
    @classmethod
    def _not_empty(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not value:
            raise ValueError("must name at least one expected value (an empty match always passes)")
        return value


class ToolCalledCheck(CheckBase):
    """The agent called a tool, optionally with given arguments, a bounded number of times."""

    kind: Literal["tool_called"]
    tool: str = Field(description="Name of the tool.")
    args: dict[str, Any] = Field(
        default_factory=dict,
        description="Argument subset a call must contain to count; empty counts every call.",
    )
    min_count: int = Field(default=1, ge=0, description="Fewest matching calls that pass.")
    max_count: int | None = Field(
        default=None, ge=0, description="Most matching calls that pass; 0 means 'never called'."
    )

    @model_validator(mode="after")
    def _can_fail(self) -> ToolCalledCheck:
        if self.max_count is not None and self.max_count < self.min_count:
            raise ValueError("max_count must be at least min_count")
        if self.min_count == 0 and self.max_count is None:
            raise ValueError("min_count 0 with no max_count can never fail; set max_count")
        return self


class TextCheck(CheckBase):
    """The agent's text contains a phrase or matches a regular expression (or, negated, doesn't)."""

    kind: Literal["text"]
    contains: str | None = Field(default=None, description="Phrase to look for.")
    regex: str | None = Field(default=None, description="Python regular expression to search for.")
    ignore_case: bool = Field(default=True, description="Match without regard to case.")
    negate: bool = Field(default=False, description="Pass when the text does NOT match.")
    scope: Literal["any", "final"] = Field(
        default="any", description="Search every assistant message, or only the final one."
    )

    @model_validator(mode="after")
    def _one_criterion(self) -> TextCheck:
        if (self.contains is None) == (self.regex is None):
            raise ValueError("give exactly one of 'contains' or 'regex'")
        if self.contains is not None and not self.contains.strip():
            raise ValueError("'contains' is empty and would always match")
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"invalid regex: {exc}") from None
            if re.fullmatch(self.regex, ""):
                raise ValueError("'regex' matches the empty string and would always match")
        return self


Check = Annotated[StateCheck | ToolCalledCheck | TextCheck, Field(discriminator="kind")]

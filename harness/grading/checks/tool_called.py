"""`tool_called`: how many times the agent called a tool with (at least) given arguments."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from harness.grading.checks import CheckContext, register_check
from harness.grading.result import Outcome
from harness.matching import partial_mismatches
from harness.specs.checks import CheckBase, References
from harness.transcript import Transcript


class ToolCalledCheck(CheckBase):
    """The agent called a tool, optionally with given arguments, a bounded number of times."""

    kind: Literal["tool_called"]
    passes_when: ClassVar[str] = (
        "a tool was called with an argument subset, between `min_count` and `max_count` times"
    )
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

    def references(self) -> References:
        return References(
            tools={("tool",): self.tool},
            tool_parameters={("args", name): (self.tool, name) for name in self.args},
            tool_arguments={
                ("args", name): (self.tool, name, value) for name, value in self.args.items()
            },
        )


@register_check(ToolCalledCheck)
def check_tool_called(
    spec: ToolCalledCheck, transcript: Transcript, context: CheckContext
) -> tuple[Outcome, str]:
    calls = [c for c in transcript.tool_calls() if c.name == spec.tool]
    matching = [c for c in calls if not partial_mismatches(spec.args, c.arguments)]
    count = len(matching)
    within = count >= spec.min_count and (spec.max_count is None or count <= spec.max_count)
    bounds = (
        f"{spec.min_count}..{spec.max_count}"
        if spec.max_count is not None
        else f">= {spec.min_count}"
    )
    with_args = f" with {spec.args}" if spec.args else ""
    reason = f"{spec.tool}{with_args} called {count} time(s), expected {bounds}"
    if not within and calls and not matching and spec.args:
        reason += f"; other calls had {calls[0].arguments}"
    return ("pass" if within else "fail"), reason

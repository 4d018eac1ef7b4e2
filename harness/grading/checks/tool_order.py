"""`tool_order`: tools were called in a given order (other calls may come between)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from harness.grading.checks import CheckContext, register_check
from harness.grading.result import Finding
from harness.specs.checks import CheckBase, References
from harness.transcript import Transcript


class ToolOrderCheck(CheckBase):
    """The agent called these tools in this order (other calls may come between them)."""

    kind: Literal["tool_order"]
    passes_when: ClassVar[str] = "tools were called in the given order"
    tools: list[str] = Field(min_length=2, description="Tool names, in the order required.")

    def references(self) -> References:
        return References(tools={("tools", i): tool for i, tool in enumerate(self.tools)})


@register_check(ToolOrderCheck)
def check_tool_order(
    spec: ToolOrderCheck, transcript: Transcript, context: CheckContext
) -> Finding:
    called = [call.name for call in transcript.tool_calls()]
    position = 0
    for name in spec.tools:
        try:
            position = called.index(name, position) + 1
        except ValueError:
            done = " -> ".join(spec.tools[: spec.tools.index(name)]) or "the start"
            return Finding("fail", f"no {name} after {done}; calls were {called}")
    return Finding("pass", " -> ".join(spec.tools) + " in order")

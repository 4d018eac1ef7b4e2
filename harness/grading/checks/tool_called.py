"""`tool_called`: how many times the agent called a tool with (at least) given arguments."""

from __future__ import annotations

from harness.grading.checks import CheckContext, register_check
from harness.grading.result import Outcome
from harness.matching import partial_mismatches
from harness.specs.checks import ToolCalledCheck
from harness.transcript import Transcript


@register_check("tool_called")
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

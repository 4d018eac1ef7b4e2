"""`no_false_success`: after a tool call failed, the agent does not tell the user the action
succeeded. The failure of production's silent errors ("Done!" after `{"error": "account jdoe is
locked"}`), decided without a model: a failed call is a tool error, or a result that is an error
value (`harness.outcomes`); the reply that counts is the agent's next message with text. A
sentence of it claiming the failed call worked (naming its file, its tool) is a false success
whatever else the reply says ("I'm sorry to hear that. Done! I uploaded photo.jpg."); a bare
"Done!" is one unless the reply says something failed; a claim about another call of the turn
that did work ("Your claim is filed. I couldn't upload photo.jpg.") is none."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from harness.grading.checks import CheckContext, register_check
from harness.grading.result import Finding
from harness.outcomes import false_successes
from harness.specs.checks import CheckBase, References
from harness.transcript import Transcript


class NoFalseSuccessCheck(CheckBase):
    """No reply claims success for a tool call that failed (see the module docstring)."""

    kind: Literal["no_false_success"]
    passes_when: ClassVar[str] = (
        "after a tool call failed (a tool error, or a result that is an error value such as "
        '`{"error": ...}`, `ok: false`, an HTTP status >= 400), the agent\'s next reply does not '
        "claim success without saying it failed; `tool` limits it to one tool"
    )
    tool: str | None = Field(
        default=None, description="Only failures of this tool count; every tool when unset."
    )

    def references(self) -> References:
        return References(tools={("tool",): self.tool} if self.tool else {})


@register_check(NoFalseSuccessCheck)
def check_no_false_success(
    spec: NoFalseSuccessCheck, transcript: Transcript, context: CheckContext
) -> Finding:
    claimed = false_successes(transcript.messages, tool=spec.tool)
    if claimed:
        tool, error, reply = claimed[0]
        return Finding(
            "fail", f"claimed success after {tool} failed ({error[:100]}): {reply[:120]!r}"
        )
    where = f" of {spec.tool}" if spec.tool else ""
    return Finding("pass", f"no reply claims success after a failed tool call{where}")

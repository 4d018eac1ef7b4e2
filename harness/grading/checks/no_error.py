"""`no_error`: the episode finished without a given error at a given tool, and without the agent
failing (crashing, returning no reply, its service failing). Tasks made from production failures
use it to state the correct behaviour without asserting the call that failed: "no KeyError at
issue_refund this time". An episode that ended in missing evidence (its error: a tool's
infrastructure, the agent's model provider, the user simulator) is not the agent's failure: its
verdict is an `error` whatever this check finds."""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from harness.grading.checks import CheckContext, register_check
from harness.grading.result import Finding
from harness.specs.checks import CheckBase, References
from harness.transcript import Transcript


class NoErrorCheck(CheckBase):
    """No tool call answered with the error (at the tool), and the agent did not crash. With
    neither `tool` nor `error`, only a crash counts."""

    kind: Literal["no_error"]
    passes_when: ClassVar[str] = (
        "no tool answered with the given exception class (`error`) at the given `tool`, and the "
        "agent did not crash (`crash: false` to allow it); with neither, only the crash counts"
    )
    tool: str | None = Field(
        default=None, description="The tool whose error results count; every tool when unset."
    )
    error: str | None = Field(
        default=None,
        description="An exception class name (e.g. KeyError) the error result must name to "
        "count; any error result when unset.",
    )
    crash: bool = Field(
        default=True,
        description="Also fail when the agent failed (end reason agent_crash): its own code "
        "raised, it returned no reply, or its service failed.",
    )

    @model_validator(mode="after")
    def _can_fail(self) -> NoErrorCheck:
        if not (self.crash or self.tool or self.error):
            raise ValueError("with crash false, give a tool or an error: this check cannot fail")
        return self

    def references(self) -> References:
        return References(tools={("tool",): self.tool} if self.tool else {})


@register_check(NoErrorCheck)
def check_no_error(spec: NoErrorCheck, transcript: Transcript, context: CheckContext) -> Finding:
    if spec.crash and (failure := transcript.agent_failure()) is not None:
        return Finding("fail", failure)
    names = re.compile(rf"\b{re.escape(spec.error)}\b") if spec.error else None
    for message in transcript.messages if spec.tool or spec.error else []:
        if message.role != "tool" or not message.is_error:
            continue
        if spec.tool is not None and message.name != spec.tool:
            continue
        if names is None or names.search(message.content):
            return Finding("fail", f"{message.name} answered {message.content[:120]!r}")
    if not (spec.tool or spec.error):
        return Finding("pass", "no agent crash")
    what = spec.error or "error"
    where = f"at {spec.tool}" if spec.tool else "at any tool"
    crash = " and no agent crash" if spec.crash else ""
    return Finding("pass", f"no {what} {where}{crash}")

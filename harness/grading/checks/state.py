"""`state`: the final environment state matches a partial expectation."""

from __future__ import annotations

from harness.grading.checks import register_check
from harness.grading.result import Outcome
from harness.matching import partial_mismatches
from harness.specs.checks import StateCheck
from harness.transcript import Transcript


@register_check("state")
def check_state(spec: StateCheck, transcript: Transcript) -> tuple[Outcome, str]:
    mismatches = partial_mismatches(spec.expect, transcript.final_state)
    if mismatches:
        more = f" (+{len(mismatches) - 1} more)" if len(mismatches) > 1 else ""
        return "fail", mismatches[0] + more
    return "pass", "final state matches"

"""`state`: the final environment state matches a partial expectation or a JSONPath."""

from __future__ import annotations

from harness.grading.checks import CheckContext, register_check
from harness.grading.result import Finding
from harness.matching import partial_mismatches
from harness.specs.checks import StateCheck
from harness.transcript import Transcript


@register_check("state")
def check_state(spec: StateCheck, transcript: Transcript, context: CheckContext) -> Finding:
    if spec.expect is not None:
        mismatches = partial_mismatches(spec.expect, transcript.final_state)
        if mismatches:
            more = f" (+{len(mismatches) - 1} more)" if len(mismatches) > 1 else ""
            return Finding("fail", mismatches[0] + more)
        return Finding("pass", "final state matches")
    from jsonpath_ng.ext import parse

    assert spec.path is not None
    values = [match.value for match in parse(spec.path).find(transcript.final_state)]
    if spec.exists is not None:
        found = bool(values)
        verb = "selects" if found else "selects nothing"
        outcome = "pass" if found == spec.exists else "fail"
        return Finding(outcome, f"{spec.path} {verb}" + (f": {values[:3]}" if values else ""))
    if not values:
        return Finding("fail", f"{spec.path} selects nothing (expected {spec.equals!r})")
    wrong = [v for v in values if v != spec.equals]
    if wrong:
        return Finding("fail", f"{spec.path}: expected {spec.equals!r}, found {wrong[0]!r}")
    return Finding("pass", f"{spec.path} == {spec.equals!r}")

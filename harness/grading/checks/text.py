"""`text`: the agent's replies contain a phrase or match a regex (or, negated, do not)."""

from __future__ import annotations

import re

from harness.grading.checks import CheckContext, register_check
from harness.grading.result import Outcome
from harness.specs.checks import TextCheck
from harness.transcript import Transcript


@register_check("text")
def check_text(
    spec: TextCheck, transcript: Transcript, context: CheckContext
) -> tuple[Outcome, str]:
    texts = transcript.assistant_texts()
    if spec.scope == "final":
        texts = texts[-1:]
    flags = re.IGNORECASE if spec.ignore_case else 0
    pattern = spec.regex if spec.regex is not None else re.escape(spec.contains or "")
    found = next((t for t in texts if re.search(pattern, t, flags)), None)
    target = f"/{spec.regex}/" if spec.regex is not None else repr(spec.contains)
    where = "the final reply" if spec.scope == "final" else "the agent's replies"
    if spec.negate:
        if found is None:
            return "pass", f"{target} absent from {where}"
        return "fail", f"{target} found in {where}: {found[:80]!r}"
    if found is not None:
        return "pass", f"{target} found in {where}"
    return "fail", f"{target} not found in {where}"

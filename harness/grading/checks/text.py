"""`text`: the agent's replies contain a phrase or match a regex (or, negated, do not)."""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from harness.grading.checks import CheckContext, register_check
from harness.grading.result import Outcome
from harness.specs.base import omit_empty
from harness.specs.checks import CheckBase
from harness.transcript import Transcript


class TextCheck(CheckBase):
    """The agent's text contains a phrase or matches a regular expression (or, negated, doesn't)."""

    kind: Literal["text"]
    passes_when: ClassVar[str] = (
        "the agent's replies (or the final one) contain a phrase or match a regex; `negate: true`"
        " inverts; `normalize: [case, commas, whitespace, punctuation]` normalises both sides "
        "first (`commas`: 1,000 reads 1000)"
    )
    contains: str | None = Field(default=None, description="Phrase to look for.")
    regex: str | None = Field(default=None, description="Python regular expression to search for.")
    ignore_case: bool = Field(default=True, description="Match without regard to case.")
    negate: bool = Field(default=False, description="Pass when the text does NOT match.")
    scope: Literal["any", "final"] = Field(
        default="any", description="Search every assistant message, or only the final one."
    )
    normalize: list[Literal["case", "commas", "whitespace", "punctuation"]] = Field(
        default_factory=list,
        description="Normalise the replies (and `contains`) before matching: `case` folds "
        "case, `commas` removes commas (1,000 reads 1000, as tau-bench's communicate_info "
        "check reads), `whitespace` collapses runs of spaces, `punctuation` removes it.",
    )

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return omit_empty(handler(self), ("normalize",))

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


PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalized(text: str, how: Sequence[str]) -> str:
    """The text as `normalize` asks: case folded, commas or punctuation removed, whitespace
    collapsed, in that order."""
    if "case" in how:
        text = text.casefold()
    if "punctuation" in how:
        text = text.translate(PUNCTUATION)
    elif "commas" in how:
        text = text.replace(",", "")
    if "whitespace" in how:
        text = " ".join(text.split())
    return text


@register_check(TextCheck)
def check_text(
    spec: TextCheck, transcript: Transcript, context: CheckContext
) -> tuple[Outcome, str]:
    texts = [normalized(t, spec.normalize) for t in transcript.assistant_texts()]
    if spec.scope == "final":
        texts = texts[-1:]
    flags = re.IGNORECASE if spec.ignore_case else 0
    wanted = normalized(spec.contains or "", spec.normalize)
    pattern = spec.regex if spec.regex is not None else re.escape(wanted)
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

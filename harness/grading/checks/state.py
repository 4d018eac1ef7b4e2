"""`state`: the final environment state matches a partial expectation or a JSONPath."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from harness.grading.checks import CheckContext, register_check
from harness.grading.result import Finding, Outcome
from harness.matching import partial_mismatches
from harness.specs.checks import CheckBase, References
from harness.specs.located import PathKey
from harness.specs.state_paths import key_path, parse_jsonpath
from harness.transcript import Transcript


class StateCheck(CheckBase):
    """The final environment state matches: a partial, recursive expectation (`expect`), or the
    values a JSONPath expression selects (`path` with `equals` or `exists`)."""

    kind: Literal["state"]
    passes_when: ClassVar[str] = (
        "the final environment state matches a partial `expect`, or a JSONPath `path` with "
        "`equals` / `exists`"
    )
    expect: dict[str, Any] | None = Field(
        default=None,
        description=(
            "Partial expected state: every key given must be present with an equal value; "
            "nested mappings match recursively, lists must be equal."
        ),
    )
    path: str | None = Field(
        default=None,
        description="JSONPath into the final state, e.g. \"$.items[?id = 'A-1'].amount\".",
    )
    equals: Any = Field(
        default=None, description="With `path`: every selected value must equal this."
    )
    exists: bool | None = Field(
        default=None, description="With `path`: something is (true) or nothing is (false) selected."
    )

    @field_validator("expect")
    @classmethod
    def _not_empty(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and not value:
            raise ValueError("must name at least one expected value (an empty match always passes)")
        return value

    @field_validator("path")
    @classmethod
    def _valid_path(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_jsonpath(value)
            except Exception as exc:  # jsonpath-ng raises several exception types
                raise ValueError(f"invalid JSONPath: {exc}") from None
        return value

    @model_validator(mode="after")
    def _one_form(self) -> StateCheck:
        if (self.expect is None) == (self.path is None):
            raise ValueError("give exactly one of 'expect' or 'path'")
        if self.path is not None and (self.exists is None) == (
            "equals" not in self.model_fields_set
        ):
            raise ValueError("with 'path', give exactly one of 'equals' or 'exists'")
        return self

    def references(self) -> References:
        if self.path is not None:
            equals: dict[PathKey, tuple[str, Any]] = (
                {("equals",): (self.path, self.equals)} if self.exists is None else {}
            )
            return References(state_paths={("path",): self.path}, state_values=equals)
        return References(
            state_paths=dict(_key_paths(self.expect or {}, ())),
            state_values={("expect",): ("$", self.expect)},
        )


def _key_paths(value: Any, keys: PathKey) -> Iterator[tuple[PathKey, str]]:
    """Every key of an expectation, at any depth (through mappings and list items), with the
    JSONPath into the state that it names: `("items", "A-1", "status")` ->
    `$.items['A-1'].status`. A key that no JSONPath can spell is left out."""
    mapping = isinstance(value, dict)
    for key, child in value.items() if mapping else enumerate(value):
        path = key_path((*keys, key)) if isinstance(key, str) or not mapping else None
        if path is None:
            continue
        if mapping:
            yield ("expect", *keys, key), path
        if isinstance(child, dict | list):
            yield from _key_paths(child, (*keys, key))


@register_check(StateCheck)
def check_state(spec: StateCheck, transcript: Transcript, context: CheckContext) -> Finding:
    if spec.expect is not None:
        mismatches = partial_mismatches(spec.expect, transcript.final_state)
        if mismatches:
            more = f" (+{len(mismatches) - 1} more)" if len(mismatches) > 1 else ""
            return Finding("fail", mismatches[0] + more)
        return Finding("pass", "final state matches")
    assert spec.path is not None
    values = [match.value for match in parse_jsonpath(spec.path).find(transcript.final_state)]
    if spec.exists is not None:
        found = bool(values)
        verb = "selects" if found else "selects nothing"
        outcome: Outcome = "pass" if found == spec.exists else "fail"
        return Finding(outcome, f"{spec.path} {verb}" + (f": {values[:3]}" if values else ""))
    if not values:
        return Finding("fail", f"{spec.path} selects nothing (expected {spec.equals!r})")
    wrong = [v for v in values if v != spec.equals]
    if wrong:
        return Finding("fail", f"{spec.path}: expected {spec.equals!r}, found {wrong[0]!r}")
    return Finding("pass", f"{spec.path} == {spec.equals!r}")

"""The parameters of each check kind a task can list. Grading handlers live in `harness.grading`.

Each kind is one model with a `kind` literal; `Check` is their discriminated union. A check that
could never fail (an empty criterion) is rejected here so it can never auto-pass a task.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from harness.specs.agent import ModelRef
from harness.specs.base import Spec


class CheckBase(Spec):
    """Fields every check kind shares: how its result counts towards the task's verdict."""

    name: str | None = Field(default=None, description="Short label shown in reports.")
    hard: bool = Field(
        default=True,
        description="A hard check must pass for the task to pass; a soft one only adds to "
        "the score.",
    )
    weight: float = Field(default=1.0, ge=0, description="Weight of a soft check in the score.")
    diagnostic: bool = Field(
        default=False, description="Reported for information only; never affects the verdict."
    )

    @property
    def gates(self) -> bool:
        """Whether this check can decide a verdict."""
        return self.hard and not self.diagnostic

    def label(self) -> str:
        """A readable name for reports."""
        return self.name or self.kind  # type: ignore[attr-defined]


class StateCheck(CheckBase):
    """The final environment state matches: a partial, recursive expectation (`expect`), or the
    values a JSONPath expression selects (`path` with `equals` or `exists`)."""

    kind: Literal["state"]
    expect: dict[str, Any] | None = Field(
        default=None,
        description=(
            "Partial expected state: every key given must be present with an equal value; "
            "nested mappings match recursively, lists must be equal."
        ),
    )
    path: str | None = Field(
        default=None,
        description="JSONPath into the final state, e.g. \"$.refunds[?order_id = 'O-1'].amount\".",
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
            from jsonpath_ng.ext import parse

            try:
                parse(value)
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


class ToolCalledCheck(CheckBase):
    """The agent called a tool, optionally with given arguments, a bounded number of times."""

    kind: Literal["tool_called"]
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


class TextCheck(CheckBase):
    """The agent's text contains a phrase or matches a regular expression (or, negated, doesn't)."""

    kind: Literal["text"]
    contains: str | None = Field(default=None, description="Phrase to look for.")
    regex: str | None = Field(default=None, description="Python regular expression to search for.")
    ignore_case: bool = Field(default=True, description="Match without regard to case.")
    negate: bool = Field(default=False, description="Pass when the text does NOT match.")
    scope: Literal["any", "final"] = Field(
        default="any", description="Search every assistant message, or only the final one."
    )

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


class ToolOrderCheck(CheckBase):
    """The agent called these tools in this order (other calls may come between them)."""

    kind: Literal["tool_order"]
    tools: list[str] = Field(min_length=2, description="Tool names, in the order required.")


class JsonSchemaCheck(CheckBase):
    """A message or a tool's arguments validate against a JSON Schema."""

    kind: Literal["json_schema"]
    schema_: dict[str, Any] = Field(alias="schema", description="The JSON Schema.")
    target: Literal["final_message", "tool_arguments"] = Field(
        default="final_message",
        description="The agent's final reply parsed as JSON (a fenced ```json block is found), "
        "or the arguments of every call of `tool`.",
    )
    tool: str | None = Field(default=None, description="With target tool_arguments: the tool.")

    @field_validator("schema_")
    @classmethod
    def _valid_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        import jsonschema

        try:
            jsonschema.Draft202012Validator.check_schema(value)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"invalid JSON Schema: {exc.message}") from None
        if not value:
            raise ValueError("an empty schema accepts everything and would always pass")
        return value

    @model_validator(mode="after")
    def _tool_for_arguments(self) -> JsonSchemaCheck:
        if (self.target == "tool_arguments") != (self.tool is not None):
            raise ValueError("'tool' is required with target tool_arguments and only allowed there")
        return self


class PythonCheck(CheckBase):
    """Checker code shipped with the task (VerIF style), run in a sandbox: a function of the
    transcript (as JSON data) returning bool, a score in [0, 1], or (bool or score, reason)."""

    kind: Literal["python"]
    code: str | None = Field(default=None, description="The checker's source code.")
    file: str | None = Field(
        default=None, description="A file with the checker's code, relative to the task file."
    )
    function: str = Field(
        default="check",
        description="Function to call: `check(transcript)`, or VerInstruct's "
        "`check_following(instruction, response)` with the task's instructions and the "
        "agent's final reply.",
    )
    threshold: float = Field(
        default=1.0, ge=0, le=1, description="Lowest score that passes, when a score is returned."
    )
    timeout_s: float = Field(default=10, gt=0, le=600, description="Wall-time limit.")
    memory_mb: int = Field(default=512, ge=64, description="Address-space limit.")

    @model_validator(mode="after")
    def _code_or_file(self) -> PythonCheck:
        if (self.code is None) == (self.file is None):
            raise ValueError("give exactly one of 'code' or 'file'")
        if self.code is not None and not self.code.strip():
            raise ValueError("'code' is empty")
        return self


class LLMJudgeCheck(CheckBase):
    """A model in the `judge` role decides whether the conversation meets a criterion."""

    kind: Literal["llm_judge"]
    criterion: str = Field(min_length=1, description="What must be true of the conversation.")
    rubric: str = Field(default="", description="How to decide: what passes, what fails.")
    model: ModelRef | None = Field(
        default=None, description="The judge model; by default the run's `--judge-model`."
    )
    retries: int = Field(
        default=1, ge=0, le=5, description="Re-asks when the judgement cannot be parsed."
    )


Check = Annotated[
    StateCheck
    | ToolCalledCheck
    | ToolOrderCheck
    | TextCheck
    | JsonSchemaCheck
    | PythonCheck
    | LLMJudgeCheck,
    Field(discriminator="kind"),
]

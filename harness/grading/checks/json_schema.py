"""`json_schema`: the final reply, or a tool's arguments, validate against a JSON Schema."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from harness.grading.checks import CheckContext, register_check
from harness.grading.result import Finding
from harness.jsontext import first_json
from harness.specs.checks import CheckBase, References
from harness.specs.located import PathKey
from harness.transcript import Transcript


class JsonSchemaCheck(CheckBase):
    """A message or a tool's arguments validate against a JSON Schema."""

    kind: Literal["json_schema"]
    passes_when: ClassVar[str] = (
        "the final reply (its JSON) or every call's arguments of a tool validate"
    )
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

    def references(self) -> References:
        if self.tool is None:
            return References()
        return References(tools={("tool",): self.tool}, tool_parameters=self._parameters(self.tool))

    def _parameters(self, tool: str) -> dict[PathKey, tuple[str, str]]:
        """The tool's parameters the schema names at its top level: its `properties` and the
        names it lists as `required` (a typo there makes every call fail the check)."""
        named: dict[PathKey, tuple[str, str]] = {}
        properties = self.schema_.get("properties")
        if isinstance(properties, dict):
            named |= {("schema", "properties", name): (tool, name) for name in properties}
        required = self.schema_.get("required")
        if isinstance(required, list):
            named |= {
                ("schema", "required", i): (tool, name)
                for i, name in enumerate(required)
                if isinstance(name, str)
            }
        return named


@register_check(JsonSchemaCheck)
def check_json_schema(
    spec: JsonSchemaCheck, transcript: Transcript, context: CheckContext
) -> Finding:
    import jsonschema

    validator = jsonschema.Draft202012Validator(spec.schema_)
    if spec.target == "final_message":
        replies = transcript.assistant_texts()
        if not replies:
            return Finding("fail", "the agent gave no reply")
        try:
            documents = [("the final reply", first_json(replies[-1]))]
        except ValueError:
            return Finding("fail", "the final reply holds no JSON")
    else:
        calls = [c for c in transcript.tool_calls() if c.name == spec.tool]
        if not calls:
            return Finding("fail", f"{spec.tool} was never called")
        documents = [(f"{spec.tool} call {i + 1}", c.arguments) for i, c in enumerate(calls)]
    for label, document in documents:
        error = jsonschema.exceptions.best_match(validator.iter_errors(document))
        if error is not None:
            where = "/".join(map(str, error.absolute_path)) or "root"
            return Finding("fail", f"{label} at {where}: {error.message}")
    return Finding("pass", f"{len(documents)} document(s) valid")

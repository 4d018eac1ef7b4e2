"""Shared bases for every YAML-facing model: unknown fields are errors, every field documented."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, GetJsonSchemaHandler, model_validator
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema


def omit_empty(data: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """A dump without the fields `names` while they are empty (None, [], {}): a spec's content
    hash (which the gate compares with its baseline's) stays what it was before they existed."""
    for name in names:
        if name in data and data[name] in (None, [], {}):
            del data[name]
    return data


class Spec(BaseModel):
    """A model read from a user's YAML file. Unknown fields are rejected so typos surface."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Shorthand(Spec):
    """A spec that may also be written as a plain string, which fills `shorthand_field`.

    Both the validator and the exported JSON Schema accept the string form."""

    shorthand_field: ClassVar[str]

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, data: Any) -> Any:
        return {cls.shorthand_field: data} if isinstance(data, str) else data

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        short = {"type": "string", "description": f"Shorthand for `{cls.shorthand_field}`."}
        return {"anyOf": [short, handler(core_schema)]}

"""JSON Schema of each spec kind, so that editors complete and check the YAML files."""

from __future__ import annotations

from typing import Any

from harness.specs.kinds import KINDS
from harness.specs.located import Location, SpecError


def json_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of a spec kind, for editor autocompletion."""
    if kind not in KINDS:
        raise SpecError.at(
            Location("schema"), "", f"unknown kind '{kind}'; expected one of: " + ", ".join(KINDS)
        )
    schema = KINDS[kind].model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema

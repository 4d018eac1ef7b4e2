"""`json_schema`: the final reply, or a tool's arguments, validate against a JSON Schema."""

from __future__ import annotations

import json
import re
from typing import Any

from harness.grading.checks import CheckContext, register_check
from harness.grading.result import Finding
from harness.specs.checks import JsonSchemaCheck
from harness.transcript import Transcript

FENCED = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def json_in(text: str) -> Any:
    """The JSON a reply carries: a fenced block, the whole text, or its first object/array."""
    candidates = [m.group(1) for m in FENCED.finditer(text)] + [text]
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            pass
    decoder = json.JSONDecoder()
    for index, char in enumerate(text):
        if char in "{[":
            try:
                return decoder.raw_decode(text, index)[0]
            except ValueError:
                continue
    raise ValueError("no JSON found")


@register_check("json_schema")
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
            documents = [("the final reply", json_in(replies[-1]))]
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

"""JSON Schema of each spec kind, so that editors complete and check the YAML files."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from harness.specs.kinds import KINDS
from harness.specs.located import Location, SpecError


def json_schema(kind: str, states: dict[str, type[BaseModel]] | None = None) -> dict[str, Any]:
    """The JSON Schema of a spec kind, for editor autocompletion."""
    if kind not in KINDS:
        raise SpecError.at(
            Location("schema"), "", f"unknown kind '{kind}'; expected one of: " + ", ".join(KINDS)
        )
    task = kind == "task" and states
    schema = _task_schema(states) if task else KINDS[kind].model_json_schema()  # type: ignore[arg-type]
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def _task_schema(states: dict[str, type[BaseModel]]) -> dict[str, Any]:
    """The task schema, with each domain's start-state model (`states`: domain name -> its
    `Environment.State`) under `domain: NAME`: the task model leaves `start.state` free for
    every domain, but a replay task's whole set-up (`recordings`, `fallback`, `matching`) is
    its state. The caller passes the models, so that specs never import a domain."""
    from harness.specs.task import Task

    models = [(Task, "validation"), *((model, "validation") for model in states.values())]
    _, shared = models_json_schema(models)  # type: ignore[arg-type]
    defs = shared["$defs"]
    schema = defs.pop("Task")
    schema["$defs"] = defs
    schema["allOf"] = []
    for domain, model in states.items():
        name = model.__name__
        # `start.state` is merged over `state_file` and `state_db`: no key is required in it.
        defs[name].pop("required", None)
        defs[name]["description"] = (
            f"The start state of a `domain: {domain}` task (see `harness domains show {domain}`)."
        )
        state = {"properties": {"start": {"properties": {"state": {"$ref": f"#/$defs/{name}"}}}}}
        domain_is = {"properties": {"domain": {"const": domain}}, "required": ["domain"]}
        schema["allOf"].append({"if": domain_is, "then": state})
    return schema

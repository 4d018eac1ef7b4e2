"""`replay`: a production app's tools, answering what they answered in production.

Tasks made by `harness traces to-tasks` (with the default `--domain replay`) need no
hand-written domain: their start state holds the tools the production agent was offered
(`tools`: name, description and JSON-schema parameters, as in its LLM calls' `tools`) and what
its tool calls returned (`recordings`: tool, arguments, and the result or the error).

A call answers the recording of the same tool with the same arguments (`None` arguments left
out); when production made that call several times, the recordings answer in turn and the last
one repeats. A recorded error answers as a tool error (`<tool> failed: KeyError: ...`), as the
tool raised it in production. A call production never made answers with the `fallback` given
for its tool (or for `*`), else with a tool error naming the tool and its arguments, so the
agent under test can react; a subclass may override `unseen` to answer such calls in code.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.domains.base import Environment, ToolError, register_domain
from harness.transcript import ToolSpec


class Recording(BaseModel):
    """One tool call seen in production and what it gave."""

    model_config = ConfigDict(extra="forbid")

    tool: str = Field(description="The tool's name.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Its arguments.")
    result: Any = Field(default=None, description="What it returned (JSON data).")
    error: str | None = Field(
        default=None, description="What it raised instead, as `Type: message`."
    )


class Fallback(BaseModel):
    """The answer to calls of a tool that production never made."""

    model_config = ConfigDict(extra="forbid")

    result: Any = Field(default=None, description="Return this.")
    error: str | None = Field(default=None, description="Or answer this tool error.")


class ReplayState(BaseModel):
    """The start state of a replay task."""

    model_config = ConfigDict(extra="forbid")

    tools: list[ToolSpec] = Field(description="The tools the production agent was offered.")
    recordings: list[Recording] = Field(
        default_factory=list, description="Production's tool calls and their results, in order."
    )
    fallback: dict[str, Fallback] = Field(
        default_factory=dict,
        description="Answers to calls production never made, by tool name or `*` for any tool.",
    )

    @model_validator(mode="after")
    def _recorded_tools_are_offered(self) -> ReplayState:
        from jsonschema.exceptions import SchemaError
        from jsonschema.validators import validator_for

        for spec in self.tools:
            try:
                validator_for(spec.parameters).check_schema(spec.parameters)
            except SchemaError as exc:
                raise ValueError(
                    f"tool {spec.name}: parameters are not a JSON Schema: {exc.message}"
                ) from None
        offered = {t.name for t in self.tools}
        unknown = sorted({r.tool for r in self.recordings} - offered)
        if unknown:
            raise ValueError(f"recordings of tools not in `tools`: {', '.join(unknown)}")
        return self


def call_key(tool: str, arguments: dict[str, Any]) -> str:
    """What identifies a call: the tool and its arguments, without `None` values, with whole
    floats as integers (45.0 and 45 are one amount)."""

    def plain(value: Any) -> Any:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items() if v is not None}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    return json.dumps([tool, plain(arguments)], sort_keys=True)


@register_domain
class ReplayEnvironment(Environment):
    """Production's tools replayed from recordings (see the module docstring)."""

    domain = "replay"
    description = (
        "A replay of a production application: its tools answer what they answered in "
        "production for the same request."
    )
    State = ReplayState

    @classmethod
    def for_state(cls, state: dict[str, Any]) -> type[Environment]:
        return cls.with_tools([ToolSpec.model_validate(t) for t in state.get("tools") or []])

    def __init__(self, state: dict[str, Any]):
        super().__init__(state)
        # The state passed `ReplayState` when its task was loaded; an episode reads only the
        # recordings and fallbacks (checking every tool's JSON Schema again cost 0.65 ms a tool).
        self._answers: dict[str, list[Recording]] = {}
        for data in self.state.get("recordings") or []:
            recording = Recording.model_validate(data)
            key = call_key(recording.tool, recording.arguments)
            self._answers.setdefault(key, []).append(recording)
        self._asked: Counter[str] = Counter()
        fallback = self.state.get("fallback") or {}
        self._fallback = {tool: Fallback.model_validate(v) for tool, v in fallback.items()}

    def call_data_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        key = call_key(name, arguments)
        recorded = self._answers.get(key)
        if not recorded:
            return self.unseen(name, arguments)
        answer = recorded[min(self._asked[key], len(recorded) - 1)]
        self._asked[key] += 1
        if answer.error is not None:
            raise ToolError(f"{name} failed: {answer.error}")
        return answer.result

    def unseen(self, name: str, arguments: dict[str, Any]) -> Any:
        """The answer to a call production never made: the `fallback` of the tool (or `*`),
        else a tool error naming the call."""
        fallback = self._fallback.get(name) or self._fallback.get("*")
        if fallback is not None:
            if fallback.error is not None:
                raise ToolError(fallback.error)
            return fallback.result
        shown = ", ".join(f"{k}={json.dumps(v)}" for k, v in arguments.items())
        raise ToolError(
            f"no recorded result for {name}({shown}): production never made this call, so the "
            "replay cannot answer it"
        )

"""`replay`: a production app's tools, answering what they answered in production.

Tasks made by `harness traces to-tasks` (with the default `--domain replay`) need no
hand-written domain: their start state holds the tools the production agent was offered
(`tools`: name, description and JSON-schema parameters, as in its LLM calls' `tools`) and what
its tool calls returned (`recordings`: tool, arguments, and the result or the error).

A call answers the recording of the same tool with the same arguments. Arguments are compared
normalised, so that wording a model does not control is no mismatch: strings in Unicode NFKC,
casefolded, whitespace collapsed and stripped; whole floats as integers; `None` arguments left
out. Which arguments identify a call is set per tool by `matching` (in the start state, by tool
name or `*` for every tool; a subclass of `ReplayEnvironment` sets the class attribute of the
same name, and the state's entries replace the class's of the same name; a tool's own entry
comes before `*`): `exact: true` (the default: every argument), `keys: [...]` (only these; a
free-text summary the model words its own way is ignored) or `ignore: [...]` (all but these).

When production made a call several times (or several recordings share the looser key), the
recordings answer in recorded order and the last one repeats. A recorded error answers as a
tool error (`Error: KeyError: ...`), as a tool raising it in the harness is shown. A call
production never made answers with the `fallback` given for its tool (or for `*`), else with a
tool error naming the tool and its arguments, so the agent under test can react; a subclass may
override `unseen` to answer such calls in code.
"""

from __future__ import annotations

import json
import unicodedata
from collections import Counter
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.domains.base import Environment, ToolError, register_domain
from harness.domains.trace_replay import TraceReplay
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


class ArgumentMatch(BaseModel):
    """Which arguments of a tool's calls identify the recording that answers them: exactly one
    of `exact`, `keys` and `ignore`."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"minProperties": 1, "maxProperties": 1}
    )

    exact: bool | None = Field(
        default=None,
        description="`true`: every argument identifies the call, compared normalised (strings "
        "casefolded, whitespace collapsed). The default for a tool without `matching`.",
    )
    keys: list[str] | None = Field(
        default=None,
        description="Only these arguments identify the call; the others (free text the model "
        "words its own way, say) are ignored.",
    )
    ignore: list[str] | None = Field(
        default=None, description="Every argument but these identifies the call."
    )

    @model_validator(mode="after")
    def _one_rule(self) -> ArgumentMatch:
        given = [name for name in ("exact", "keys", "ignore") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of `exact: true`, `keys` or `ignore`, not {' and '.join(given)}"
                if given
                else "give one of `exact: true`, `keys` or `ignore`"
            )
        if self.exact is False:
            raise ValueError("`exact` can only be true; to compare fewer arguments give `keys`")
        return self

    def identifying(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments that identify a call under this rule."""
        if self.keys is not None:
            return {k: v for k, v in arguments.items() if k in self.keys}
        if self.ignore is not None:
            return {k: v for k, v in arguments.items() if k not in self.ignore}
        return arguments


EXACT = ArgumentMatch(exact=True)


class ReplayState(BaseModel):
    """The start state of a replay task (`domain: replay`)."""

    model_config = ConfigDict(extra="forbid")

    tools: list[ToolSpec] = Field(description="The tools the production agent was offered.")
    recordings: list[Recording] = Field(
        default_factory=list,
        description="Production's tool calls and their results, in order. A call answers the "
        "recording of its tool whose arguments match (see `matching`); several matching "
        "recordings answer in turn, the last one repeating.",
    )
    fallback: dict[str, Fallback] = Field(
        default_factory=dict,
        description="Answers to calls production never made, by tool name or `*` for any tool; "
        "without one, such a call answers a tool error naming it.",
    )
    matching: dict[str, ArgumentMatch] = Field(
        default_factory=dict,
        description="Which arguments identify a call, by tool name or `*` for every tool (a "
        "tool's own entry first); over the domain class's `matching`. Default: every argument, "
        "strings compared casefolded with whitespace collapsed.",
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
        unknown = sorted(set(self.matching) - offered - {"*"})
        if unknown:
            raise ValueError(f"matching of tools not in `tools`: {', '.join(unknown)}")
        return self


def normalised(value: Any) -> Any:
    """A value as calls are compared: strings in NFKC, casefolded, whitespace collapsed and
    stripped (a model's wording is not production's); whole floats as integers (45.0 and 45 are
    one amount); `None` values of mappings left out (an unset optional argument)."""
    if isinstance(value, str):
        return " ".join(unicodedata.normalize("NFKC", value).casefold().split())
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: normalised(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [normalised(v) for v in value]
    return value


def call_key(tool: str, arguments: dict[str, Any]) -> str:
    """What identifies a call: the tool and its normalised arguments, keys sorted."""
    return json.dumps([tool, normalised(arguments)], sort_keys=True)


@register_domain
class ReplayEnvironment(TraceReplay, Environment):
    """Production's tools replayed from recordings (see the module docstring)."""

    domain = "replay"
    description = (
        "A replay of a production application: its tools answer what they answered in "
        "production for the same request."
    )
    State = ReplayState
    matching: ClassVar[dict[str, ArgumentMatch]] = {}
    """Which arguments identify a call, by tool name or `*`: a subclass's default for its
    tasks; a task's `start.state.matching` entries replace these of the same name."""

    @classmethod
    def for_state(cls, state: dict[str, Any]) -> type[Environment]:
        return cls.with_tools([ToolSpec.model_validate(t) for t in state.get("tools") or []])

    def __init__(self, state: dict[str, Any]):
        super().__init__(state)
        # The state passed `ReplayState` when its task was loaded; an episode reads only the
        # recordings, fallbacks and matching (checking every tool's JSON Schema again cost
        # 0.65 ms a tool).
        matching = self.state.get("matching") or {}
        self._matching = {
            **type(self).matching,
            **{tool: ArgumentMatch.model_validate(v) for tool, v in matching.items()},
        }
        self._answers: dict[str, list[Recording]] = {}
        for data in self.state.get("recordings") or []:
            recording = Recording.model_validate(data)
            key = self.match_key(recording.tool, recording.arguments)
            self._answers.setdefault(key, []).append(recording)
        self._asked: Counter[str] = Counter()
        fallback = self.state.get("fallback") or {}
        self._fallback = {tool: Fallback.model_validate(v) for tool, v in fallback.items()}

    def match_key(self, tool: str, arguments: dict[str, Any]) -> str:
        """What identifies a call of `tool` under its `matching` rule (the tool's, else `*`'s,
        else every argument)."""
        rule = self._matching.get(tool) or self._matching.get("*") or EXACT
        return call_key(tool, rule.identifying(arguments))

    def call_data_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        key = self.match_key(name, arguments)
        recorded = self._answers.get(key)
        if not recorded:
            return self.unseen(name, arguments)
        answer = recorded[min(self._asked[key], len(recorded) - 1)]
        self._asked[key] += 1
        if answer.error is not None:
            raise ToolError(answer.error)  # `Type: message`, as a tool raising it is shown
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

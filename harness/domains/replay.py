"""`replay`: a production app's tools, answering what they answered in production.

Tasks made by `harness traces to-tasks` (with the default `--domain replay`) need no
hand-written domain: their start state holds the tools the production agent was offered
(`tools`: name, description and JSON-schema parameters, as in its LLM calls' `tools`) and what
its tool calls returned (`recordings`: tool, arguments, and the result or the error).

A call answers the recording of the same tool with the same arguments. Arguments are compared
normalised, so that wording a model does not control is no mismatch: strings in Unicode NFKC,
casefolded, whitespace collapsed and stripped; whole floats as integers; `None` arguments left
out. Free text is matched loosely by default: a string argument production filled with several
words (a `summary`, a `reason`) does not identify a call; of the recordings that match on the
other arguments, the one whose wording is nearest (most words shared) answers, so a changed
agent that words a summary its own way gets production's answer. Which arguments identify a
call can be set per tool with `matching` (in the start state, by tool name or `*` for every
tool; a subclass of `ReplayEnvironment` sets the class attribute of the same name, and the
state's entries replace the class's of the same name; a tool's own entry comes before `*`):
`exact: true` (every argument, free text too), `keys: [...]` (only these) or `ignore: [...]`
(all but these).

When production made a call several times (or several recordings match), the recordings answer
in recorded order and the last one repeats. A recorded error answers as a tool error (`Error:
KeyError: ...`), as a tool raising it in the harness is shown.

A call production never made (a changed agent's own call) answers, in this order: the
`fallback` given for its tool (or for `*`); else, with `unrecorded: nearest` (the default), like
the nearest recording of the same tool: the one with the most arguments equal, a successful one
before a failure (raised, or an error value such as `{"status": "failed"}`: an unrecorded write
succeeds, in the shape production's succeeded), then the nearest wording; with the call's own
argument values in place of the recording's wherever the answer echoed them (a corrected
`coverage: water` reads back `water`). So an unrecorded read answers like the nearest recording,
an unrecorded write succeeds with the recorded shape, and the task's checks, not the replay,
judge the call's arguments. With `unrecorded: error`, or for a tool production never called,
such a call answers a tool error naming the tool and its arguments. A subclass may override
`unseen` to answer such calls in code.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.domains.base import Environment, ToolError, register_domain
from harness.domains.trace_replay import TraceReplay
from harness.outcomes import DEFAULT
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
        "tool's own entry first); over the domain class's `matching`. Default: every argument "
        "but free text (a string production filled with several words), strings compared "
        "casefolded with whitespace collapsed; of the recordings that match, the one whose free "
        "text is worded nearest answers.",
    )
    unrecorded: Literal["nearest", "error"] = Field(
        default="nearest",
        description="How a call no recording matches (and no `fallback` answers) is answered: "
        "`nearest`, like the nearest recording of its tool (most arguments equal, a successful "
        "one before an error, then the nearest wording), with the call's argument values in "
        "place of the recording's; `error`, a tool error naming the call.",
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


WORDS = re.compile(r"\w+")


def words(arguments: dict[str, Any], free: frozenset[str]) -> frozenset[str]:
    """The words of a call's free-text arguments, normalised."""
    return frozenset(
        w for name in free for w in WORDS.findall(str(normalised(arguments.get(name) or "")))
    )


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """The share of words two wordings have in common (1 for two empty ones)."""
    return len(a & b) / len(a | b) if a or b else 1.0


def echoed(answer: Any, recorded: dict[str, Any], called: dict[str, Any]) -> Any:
    """`answer` with the call's own argument values wherever it echoed the recorded call's
    (a corrected `coverage: water` for the recorded `flood`): whole values equal to a recorded
    argument, and recorded strings of three characters or more standing as words in text."""
    swaps = {
        name: (recorded[name], called[name])
        for name in recorded.keys() & called.keys()
        if normalised(recorded[name]) != normalised(called[name])
        and not isinstance(recorded[name], dict | list | bool)
        and recorded[name] is not None
    }
    if not swaps:
        return answer
    whole = {json.dumps(old): new for old, new in swaps.values()}
    texts = {old: str(new) for old, new in swaps.values() if isinstance(old, str) and len(old) >= 3}
    pattern = (
        re.compile(
            "|".join(
                rf"(?<![\w-]){re.escape(old)}(?![\w-])"
                for old in sorted(texts, key=len, reverse=True)
            )
        )
        if texts
        else None
    )

    def swap(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        if isinstance(value, bool) or value is None:
            return value
        key = json.dumps(value)
        if key in whole:
            return whole[key]
        if isinstance(value, str) and pattern is not None:
            return pattern.sub(lambda m: texts[m.group()], value)
        return value

    return swap(answer)


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
        recordings = [Recording.model_validate(r) for r in self.state.get("recordings") or []]
        self._by_tool: dict[str, list[Recording]] = {}
        for recording in recordings:
            self._by_tool.setdefault(recording.tool, []).append(recording)
        self._free = {tool: self._free_text(tool, found) for tool, found in self._by_tool.items()}
        self._answers: dict[str, list[Recording]] = {}
        for recording in recordings:
            key = self.match_key(recording.tool, recording.arguments)
            self._answers.setdefault(key, []).append(recording)
        self._asked: Counter[str] = Counter()
        self._used: set[int] = set()
        fallback = self.state.get("fallback") or {}
        self._fallback = {tool: Fallback.model_validate(v) for tool, v in fallback.items()}
        self._unrecorded = self.state.get("unrecorded") or "nearest"

    def _rule(self, tool: str) -> ArgumentMatch | None:
        return self._matching.get(tool) or self._matching.get("*")

    def _free_text(self, tool: str, recordings: list[Recording]) -> frozenset[str]:
        """The free-text arguments of a tool: strings production filled with several words,
        unless the tool's parameters give them a few allowed values (`enum`)."""
        spec = getattr(self._tools.get(tool), "spec", None)
        properties = (spec.parameters.get("properties") or {}) if spec else {}
        return frozenset(
            name
            for r in recordings
            for name, value in r.arguments.items()
            if isinstance(value, str)
            and len(value.split()) > 1
            and not (properties.get(name) or {}).get("enum")
        )

    def match_key(self, tool: str, arguments: dict[str, Any]) -> str:
        """What identifies a call of `tool` under its `matching` rule (the tool's, else `*`'s,
        else every argument but free text)."""
        rule = self._rule(tool)
        if rule is not None:
            return call_key(tool, rule.identifying(arguments))
        free = self._free.get(tool, frozenset())
        return call_key(tool, {k: v for k, v in arguments.items() if k not in free})

    def call_data_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        key = self.match_key(name, arguments)
        recorded = self._answers.get(key)
        if not recorded:
            return self.unseen(name, arguments)
        if self._rule(name) is not None:
            answer = recorded[min(self._asked[key], len(recorded) - 1)]
            self._asked[key] += 1
        else:
            answer = self._nearest_wording(name, recorded, arguments)
        return self._answer(answer, arguments)

    def _nearest_wording(
        self, tool: str, recorded: list[Recording], arguments: dict[str, Any]
    ) -> Recording:
        """Of the recordings matching on the other arguments, the one whose free text is worded
        nearest; of equally near ones, an unused one in recorded order, else the last."""
        free = self._free.get(tool, frozenset())
        said = words(arguments, free)
        scores = [similarity(said, words(r.arguments, free)) for r in recorded]
        best = max(scores)
        nearest = [r for r, score in zip(recorded, scores, strict=True) if score == best]
        fresh = [r for r in nearest if id(r) not in self._used]
        chosen = fresh[0] if fresh else nearest[-1]
        self._used.add(id(chosen))
        return chosen

    def _answer(self, recording: Recording, arguments: dict[str, Any]) -> Any:
        """A recording's answer to a call, with the call's own values where it echoed the
        recorded call's."""
        if recording.error is not None:  # `Type: message`, as a tool raising it is shown
            raise ToolError(echoed(recording.error, recording.arguments, arguments))
        return echoed(recording.result, recording.arguments, arguments)

    def nearest(self, name: str, arguments: dict[str, Any]) -> Recording | None:
        """The recording of `name` nearest a call production never made: the most arguments
        equal (free text aside), a successful one before a failure (raised, or an error value
        such as `{"status": "failed"}`, `harness.outcomes`), the nearest wording, the earliest;
        None when production never called the tool."""
        recorded = self._by_tool.get(name)
        if not recorded:
            return None
        free = self._free.get(name, frozenset())
        said = words(arguments, free)
        wanted = {k: normalised(v) for k, v in arguments.items() if k not in free}

        def nearness(item: tuple[int, Recording]) -> tuple[int, bool, float, int]:
            index, recording = item
            same = sum(normalised(recording.arguments.get(k)) == v for k, v in wanted.items())
            wording = similarity(said, words(recording.arguments, free))
            worked = recording.error is None and DEFAULT.of(recording.result) is None
            return same, worked, wording, -index

        return max(enumerate(recorded), key=nearness)[1]

    def unseen(self, name: str, arguments: dict[str, Any]) -> Any:
        """The answer to a call production never made: the `fallback` of the tool (or `*`),
        else the nearest recording's (`unrecorded: nearest`), else a tool error naming the
        call."""
        fallback = self._fallback.get(name) or self._fallback.get("*")
        if fallback is not None:
            if fallback.error is not None:
                raise ToolError(fallback.error)
            return fallback.result
        nearest = self.nearest(name, arguments) if self._unrecorded == "nearest" else None
        if nearest is not None:
            return self._answer(nearest, arguments)
        shown = ", ".join(f"{k}={json.dumps(v)}" for k, v in arguments.items())
        raise ToolError(
            f"no recorded result for {name}({shown}): production never made this call, so the "
            "replay cannot answer it"
        )

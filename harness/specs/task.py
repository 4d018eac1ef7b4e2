"""A task: how an episode starts, how it ends, and how it is graded."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    Tag,
    field_validator,
    model_serializer,
)

from harness.defaults import STOP_SIGNALS
from harness.specs.base import Spec, omit_empty
from harness.specs.checks import check_union
from harness.specs.persona import Persona
from harness.transcript import Message

if TYPE_CHECKING:  # at run time `Check` is resolved on first use: see `Task.model_rebuild`
    from harness.specs.checks import Check


class PersonaMix(Spec):
    """Simulated users drawn from a folder of personas, one per episode, weighted by traffic."""

    mix: str = Field(
        description="A folder of persona files, relative to the task's folder or to one of its "
        "parents (as `personas/` is found), e.g. `personas/mined/`. Each episode plays one of "
        "them, drawn by their `share` (equal weights when none has one) from the task id and "
        "trial, so that A/B runs of a trial meet the same user."
    )


def _persona_kind(value: Any) -> str:
    if isinstance(value, str):
        return "name"
    mixed = isinstance(value, PersonaMix) or (isinstance(value, dict) and "mix" in value)
    return "mix" if mixed else "inline"


PersonaRef = Annotated[
    Annotated[str, Tag("name")]
    | Annotated[PersonaMix, Tag("mix")]
    | Annotated[Persona, Tag("inline")],
    Discriminator(_persona_kind),
]


class Scenario(Spec):
    """What the simulated user wants and what they may reveal. The agent never sees this."""

    reason: str = Field(description="Why the user contacts the agent.")
    instructions: str = Field(default="", description="How the user should pursue the goal.")
    known_info: dict[str, str] = Field(
        default_factory=dict,
        description="Facts the user knows and may reveal when asked, in the order given; a "
        "persona's `behaviour` says how many the first message gives.",
    )
    unknown_info: list[str] = Field(
        default_factory=list, description="Things the user does not know and must not invent."
    )


class Start(Spec):
    """How the episode starts."""

    state_file: str | None = Field(
        default=None, description="JSON file (relative to the task file) with the initial state."
    )
    state_db: str | None = Field(
        default=None,
        description="SQLite snapshot of production data (relative to the task file), merged "
        "over `state_file`; see harness.sim.env for how tables map onto the state.",
    )
    state: dict[str, Any] = Field(
        default_factory=dict,
        description="Initial environment state, merged over `state_file` and `state_db`.",
    )
    first_message: str | None = Field(
        default=None,
        description="The user's opening message, sent as written (it fills no templates); "
        "otherwise the persona opens.",
    )
    history: list[Message] = Field(
        default_factory=list, description="Prior conversation the episode continues from."
    )

    @field_validator("first_message")
    @classmethod
    def _fills_no_templates(cls, message: str | None) -> str | None:
        """A `{known.KEY}` here would reach the agent as written: only a scripted persona's
        replies fill templates."""
        found = re.search(r"\{known\.[\w-]+\}", message or "")
        if found:
            raise ValueError(
                f"`{found.group(0)}` would reach the agent as written: the first message fills "
                "no templates (a scripted persona's replies do); write the fact itself"
            )
        return message


EndRequirement = Literal[
    "stop", "user_stop", "transfer", "out_of_scope", "agent_handoff", "max_turns", "timeout"
]
STOPPED = ("user_stop", "transfer", "out_of_scope", "agent_handoff")  # `require: [stop]`


class End(Spec):
    """How the episode ends."""

    max_turns: int = Field(default=10, ge=1, le=200, description="Most user turns.")
    stop_signals: list[str] = Field(
        default_factory=lambda: list(STOP_SIGNALS),
        min_length=1,
        description="Text in a user message that ends the episode.",
    )
    max_seconds: float = Field(default=300, gt=0, description="Wall-time limit of the episode.")
    require: list[EndRequirement] = Field(
        default_factory=list,
        description="How the episode must end for the task to pass: end reasons (`user_stop`, "
        "`transfer`, `out_of_scope`, `agent_handoff`, `max_turns`, `timeout`), or `stop` for "
        "any ended by a stop signal or a hand-off (tau-bench scores an episode that hit the "
        "turn limit 0). Another ending fails the task, whatever its checks say.",
    )

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return omit_empty(handler(self), ("require",))

    def admits(self, reason: str) -> bool:
        """Whether an episode that ended with `reason` meets `require` (always, when empty)."""
        return (
            not self.require
            or reason in self.require
            or ("stop" in self.require and reason in STOPPED)
        )


class GoldAction(Spec):
    """One tool call of the task's reference solution."""

    tool: str = Field(description="The tool, by name.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Its arguments.")


class Provenance(Spec):
    """Where a task made from production traces came from."""

    project: str = Field(default="", description="The Weave project (entity/project).")
    kind: Literal["failure", "success"] = Field(description="What the traces showed.")
    signature: str = Field(description="What the clustered traces share.")
    count: int | None = Field(
        default=None, ge=1, description="How many conversations (sessions) the task stands for."
    )
    traces: int = Field(ge=1, description="How many traces those conversations spanned.")
    trace_ids: list[str] = Field(
        default_factory=list, description="Their traces (the first 1000 when there are more)."
    )
    call_ids: list[str] = Field(
        default_factory=list,
        description="The calls that carry the failure (where an exception started, or that got "
        "the feedback); for a success, the root calls.",
    )
    first_seen: str = Field(default="", description="When the first occurrence happened.")
    last_seen: str = Field(default="", description="When the last occurrence happened.")
    reasons: list[str] = Field(default_factory=list, description="Why it is a failure.")


class Task(Spec):
    """One evaluation task: a scenario in a domain, start and end conditions, and checks."""

    model_config = ConfigDict(defer_build=True)

    kind: Literal["task"] = Field(description="File kind.")
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="Unique task id.")
    title: str = Field(description="One-line summary.")
    level: int = Field(ge=1, le=3, description="Difficulty: 1 (basic) to 3 (hard).")
    tags: list[str] = Field(default_factory=list, description="Labels for selecting tasks.")
    domain: str = Field(
        description="The environment and tools: a registered domain name ('support', or one a "
        "plug-in registers), 'package.module:Class', or 'path/to/file.py:Class' relative to "
        "this file."
    )
    persona: PersonaRef = Field(
        description="A persona's name, a persona written inline, or `{mix: FOLDER}`: one of "
        "a folder's personas per episode, weighted by their traffic `share`."
    )
    scenario: Scenario = Field(description="The simulated user's goal and knowledge.")
    start: Start = Field(default_factory=Start, description="Start conditions.")
    end: End = Field(default_factory=End, description="End conditions.")
    checks: list[Check] = Field(description="How the episode is graded.")
    gold_actions: list[GoldAction] = Field(
        default_factory=list,
        description="The reference solution's tool calls, in order: an `end_state` check with "
        "`gold: true` expects the start state with them replayed through the domain's tools.",
    )
    source: Provenance | None = Field(
        default=None, description="For a task made from production traces: its provenance."
    )

    @classmethod
    def model_rebuild(cls, **kwargs: Any) -> bool | None:
        """`checks` lists any registered check kind; the kinds' modules import this one, so the
        model is built on first use (pydantic rebuilds it then), with `Check` resolved here."""
        namespace = {"Check": check_union(), **(kwargs.pop("_types_namespace", None) or {})}
        return super().model_rebuild(_types_namespace=namespace, **kwargs)

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return omit_empty(handler(self), ("gold_actions",))

    @field_validator("checks")
    @classmethod
    def _has_gating_check(cls, checks: list[Any]) -> list[Any]:
        if not any(check.gates for check in checks):
            raise ValueError(
                "no hard, non-diagnostic check: a task that cannot fail would auto-pass"
            )
        return checks

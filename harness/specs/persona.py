"""A simulated user: who they are and how they speak. The task says what they want."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from harness.specs.agent import ModelRef
from harness.specs.base import Spec
from harness.specs.located import PathKey
from harness.specs.script import Regex, Rule, Searched, When, never_firing

NEVER_SEEN = "Never holds: a simulated user does not see tool results (`harness validate` warns)."


class PersonaWhen(When):
    """Conditions of a persona's scripted turn; all given conditions must hold. The persona's
    words (with the task's `first_message`, which it is taken to have said) are its own, the
    agent's words are the other side's: `agent_said`, `agent_history` and `i_said` say which."""

    regex_conditions: ClassVar[dict[str, tuple[str, Searched]]] = {
        **When.regex_conditions,
        "agent_said": ("agent_said", "last_user"),
        "agent_history": ("agent_history", "user_messages"),
        "i_said": ("i_said", "own_messages"),
    }

    agent_said: Regex | None = Field(
        default=None,
        description="Regex searched in the agent's last message with text ('(The agent did not "
        "reply.)' when its last turn wrote none); groups become `{agent_said.N}`.",
    )
    agent_history: Regex | None = Field(
        default=None,
        description="Regex searched in every message the agent wrote, newest first, its last "
        "included; the newest that matches gives `{agent_history.N}`. For 'the agent said X at "
        "some point', where `agent_said` is 'the agent just said X'.",
    )
    i_said: Regex | None = Field(
        default=None,
        description="Regex searched in this persona's own earlier messages, newest first, the "
        "task's `first_message` included (never the agent's); the newest that matches gives "
        "`{i_said.N}`. For 'I already said X': a rule `when: {i_said: '(?i)reconsider'}` placed "
        "before the rule that asks to reconsider makes the persona ask once.",
    )
    matches: Regex | None = Field(
        default=None,
        description="Regex searched in the last message, which for a persona is always the "
        "agent's: the same as `agent_said`, the clearer name; groups become `{m.N}`.",
    )
    user: Regex | None = Field(
        default=None,
        description="Regex searched in the agent's last message (a simulated user's model sees "
        "the agent as the `user` role): the same as `agent_said`, the clearer name; groups "
        "become `{u.N}`.",
    )
    history: Regex | None = Field(
        default=None,
        description="Regex searched in every message the AGENT wrote, newest first (a simulated "
        "user's model sees the agent as the `user` role), never the persona's own: the same as "
        "`agent_history`; for what the persona said use `i_said`. The newest that matches gives "
        "`{h.N}`.",
    )
    system: Regex | None = Field(
        default=None,
        description="Regex that the simulated user's instructions must match: the prompt the "
        "harness builds from the persona and the task's scenario (its reason, instructions and "
        "known facts), so one persona can answer differently per task.",
    )
    turn: int | None = Field(
        default=None,
        ge=1,
        description="Holds on the persona's Nth message of the conversation, counting the "
        "task's opening: when the task gives `start.first_message`, that message is turn 1 and "
        "the persona's first scripted reply is turn 2; without one the persona opens, answering "
        "the agent's greeting, at turn 1. Each user message of `start.history` counts as one "
        "turn too. `harness validate` warns about a turn that a task's inline persona never "
        "reaches.",
    )
    tool: str | None = Field(default=None, description=NEVER_SEEN)
    result: dict[str, Any] | None = Field(default=None, description=NEVER_SEEN)
    error: bool | None = Field(default=None, description=NEVER_SEEN)

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Leave the persona-only conditions out of a dump while unset: a task's content hash
        (which the gate compares with its baseline's) stays what it was before they existed."""
        data: dict[str, Any] = handler(self)
        for name in ("agent_said", "agent_history", "i_said"):
            if data.get(name) is None:
                data.pop(name, None)
        return data


class PersonaRule(Rule):
    """One `when -> reply` rule of a persona's scripted turns."""

    when: PersonaWhen = Field(
        default_factory=PersonaWhen,
        description="Conditions; empty is the fallback, and the rules after it never fire.",
    )


REACTIONS = ("pushback_rate", "rephrase_rate", "pivot_rate", "abandon_rate")


class Behaviour(Spec):
    """How a user behaves, as measured values (shares and counts, never adjectives): the
    rule-based simulator executes them and LLM simulators get them as calibrated instructions.
    The facts a user holds are the task scenario's `known_info`."""

    disclosure_first: float = Field(
        default=1.0,
        ge=0,
        le=1,
        description="Share of the facts the user holds (the scenario's `known_info`) that the "
        "first message gives: 1 front-loads everything, 0.25 gives 1 of 4; the rest are given "
        "one per agent question (the one the question names, else the next).",
    )
    clarify_rate: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Share of the user's answers to an agent question (not an error or "
        "refusal) that ask back (what the agent means, why it needs something) instead of "
        "answering; the fact asked for then comes with the next question.",
    )
    pushback_rate: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="After an agent error or refusal: share of reactions that push back "
        "(insist the agent does it).",
    )
    rephrase_rate: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="After an agent error or refusal: share of reactions that restate the "
        "request in other words.",
    )
    pivot_rate: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="After an agent error or refusal: share of reactions that drop the request "
        "and ask for something else.",
    )
    abandon_rate: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="After an agent error or refusal: share of reactions that leave the "
        "conversation unsatisfied. The four reaction rates sum to at most 1; the rest accept "
        "the answer and end the conversation.",
    )
    patience: int | None = Field(
        default=None,
        ge=1,
        description="User turns before giving up (the user writes this many messages, then "
        "gives up instead of writing another); when set, overrides the persona's `patience`.",
    )
    words_per_turn: float | None = Field(
        default=None,
        gt=0,
        description="Typical length of a user message, in words (an LLM simulator is told it; "
        "the scripted simulator's messages are fixed phrases).",
    )
    examples: list[Annotated[str, StringConstraints(max_length=500)]] = Field(
        default_factory=list,
        max_length=10,
        description="A few real user messages of this profile (each at most 500 characters): "
        "LLM simulators get up to 3 of them verbatim as style samples.",
    )

    @model_validator(mode="after")
    def _reactions_sum_to_at_most_one(self) -> Behaviour:
        total = sum(getattr(self, name) for name in REACTIONS)
        if total > 1 + 1e-9:
            raise ValueError(
                f"pushback_rate + rephrase_rate + pivot_rate + abandon_rate is {total:.3g}; "
                "they share the reactions to an agent error and must sum to at most 1"
            )
        return self

    @property
    def accept_rate(self) -> float:
        """Share of reactions to an agent error that accept it and end the conversation."""
        return max(0.0, 1.0 - sum(getattr(self, name) for name in REACTIONS))


class Persona(Spec):
    """A simulated user persona, played by an LLM or, for exact tests, by scripted turns."""

    kind: Literal["persona"] = Field(default="persona", description="File kind.")
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", description="Name tasks refer to.")
    description: str = Field(default="", description="Who this user is.")
    traits: list[str] = Field(default_factory=list, description="Personality traits to play.")
    style: str = Field(default="", description="How the user writes (length, tone, spelling).")
    patience: int = Field(default=8, ge=1, description="Agent turns before the user gives up.")
    model: ModelRef = Field(
        default_factory=lambda: ModelRef(id="scripted"),
        description="Model that plays the user, e.g. 'openai/gpt-4.1-mini' or 'local/smollm2'; "
        "'scripted' plays `scripted_turns` instead (switch a whole run with "
        "`--set persona.model=...`).",
    )
    temperature: float = Field(default=0.7, ge=0, le=2, description="Sampling temperature.")
    share: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Its share of production traffic (written by `harness personas "
        "from-traces`); weights it when a task draws its persona from a `mix:` folder.",
    )
    behaviour: Behaviour | None = Field(
        default=None,
        description="Measured behaviour (information disclosure, reactions to agent errors, "
        "patience, message length, example messages): the scripted simulator executes it and "
        "an LLM simulator gets it as concrete instructions. Optional: without it the persona "
        "plays as before.",
    )
    scripted_turns: list[PersonaRule] = Field(
        default_factory=list,
        description="Deterministic replies: the first rule whose conditions hold (on what the "
        "agent said, what the persona said, the turn) and whose templates fill gives the "
        "persona's next message; templates may use `{known.KEY}` from the task's scenario.",
        validate_default=True,
    )

    @field_validator("scripted_turns")
    @classmethod
    def _scripted_needs_turns(
        cls, turns: list[PersonaRule], info: ValidationInfo
    ) -> list[PersonaRule]:
        model = info.data.get("model")
        # an invalid `behaviour` is missing from `info.data`: its own error says enough
        behaves = info.data.get("behaviour", True) is not None
        if model is not None and model.id == "scripted" and not turns and not behaves:
            raise ValueError("model 'scripted' needs scripted_turns")
        return turns

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Leave `behaviour` and `share` out of a dump while unset: the content hash of a task
        (which the gate compares with its baseline's) stays what it was before they existed."""
        data: dict[str, Any] = handler(self)
        for name in ("behaviour", "share"):
            if data.get(name) is None:
                data.pop(name, None)
        return data


def persona_warnings(
    persona: Persona, where: PathKey = (), first_turn: int = 1
) -> list[tuple[PathKey, str]]:
    """What `harness validate` warns about in a persona's scripted turns (at `where` in its
    file): rules that never fire, and `history`/`user`, whose names read as the persona's own
    words but search the agent's. `first_turn` is the turn of the persona's first scripted reply
    in the task that plays it (2 after a `first_message`; see `PersonaWhen.turn`)."""
    at = (*where, "scripted_turns")
    warnings = never_firing(persona.scripted_turns, at, sees_tools=False)
    warnings += turn_warnings(persona, where, first_turn)
    for index, rule in enumerate(persona.scripted_turns):
        when = rule.when
        if when.history is not None:
            warnings.append(
                (
                    (*at, index, "when", "history"),
                    "`history` searches the agent's messages, not the persona's own: write "
                    "`agent_history` to say so, or `i_said` for what the persona said",
                )
            )
        if when.user is not None:
            warnings.append(
                (
                    (*at, index, "when", "user"),
                    "`user` searches the agent's last message (the simulated user's model sees "
                    "the agent as `user`): write `agent_said` to say so",
                )
            )
    return sorted(warnings, key=lambda warning: warning[0][len(at)])


def turn_warnings(
    persona: Persona, where: PathKey = (), first_turn: int = 1
) -> list[tuple[PathKey, str]]:
    """The scripted turns of a persona that ask for a turn before its first reply in a task
    (`first_turn`: 2 after a `first_message`), so never fire there."""
    warnings = []
    opening = "turn 1" if first_turn == 2 else f"turns 1 to {first_turn - 1}"
    for index, rule in enumerate(persona.scripted_turns):
        if rule.when.turn is not None and rule.when.turn < first_turn:
            warnings.append(
                (
                    (*where, "scripted_turns", index, "when", "turn"),
                    f"never fires: the task's opening user messages (`start.first_message`, "
                    f"`start.history`) are the persona's {opening}, so its first scripted reply "
                    f"is turn {first_turn}",
                )
            )
    return warnings


def misspelt_facts(persona: Persona, known: Mapping[str, Any]) -> list[tuple[PathKey, str]]:
    """The `{known.KEY}` placeholders of a scripted persona's replies that name a fact the
    task's `scenario.known_info` (`known`) lacks but nearly has (`nme` for `name`), each keyed
    by its rule's reply under `scripted_turns`: such a rule can never fill in that task, and
    falls through to the next one silently. A fact no key of the task comes close to is no
    problem: a persona shared by many tasks may read facts that only some of them hold (the
    rule then gives way to the next, as documented). A persona played by a model does not
    play its rules, so it has none."""
    if persona.model.id != "scripted":
        return []
    names = list(known)
    found: list[tuple[PathKey, str]] = []
    for index, rule in enumerate(persona.scripted_turns):
        for placeholder in dict.fromkeys(rule.reply.placeholders()):
            root, _, rest = placeholder.partition(".")
            key = rest.split(".")[0]
            if root != "known" or not key or key in known:
                continue
            close = difflib.get_close_matches(key, names, n=1)
            if close:
                found.append(
                    (
                        ("scripted_turns", index, "reply"),
                        f"`{{{placeholder}}}` names no fact of the task (its "
                        f"scenario.known_info has {', '.join(names)}): did you mean "
                        f"`{{known.{close[0]}}}`?",
                    )
                )
    return found

"""A persona's measured `behaviour`, executed: by rules for a scripted persona, as calibrated
instructions (numbers and real examples, never adjectives) for a persona played by a model.

The facts a user holds are the scenario's `known_info`, in order. A fact counts as given once
its value appears in one of the user's messages (the task's `first_message` included).

The rule-based player answers in this order: the persona's `scripted_turns` rules that have
conditions; then the behaviour (the opening, the reaction to an agent error or refusal, asking
back, one more fact per agent question); then its unconditional (fallback) rules; then it ends
the conversation, satisfied. An agent error or refusal is what the behaviour measures count as
one (`harness.reactions.reports_error`: the agent says something failed or cannot
be done; an apology such as "I'm sorry to hear that" is not one), so that a simulated user
reacts where a measured one would have, and its reactions (`PUSH_BACK` ... `ACCEPT`) read back
as the reactions they play. Its random draws come from the episode's seed and trial, so an
episode is the same on every run.
"""

from __future__ import annotations

import math
import random
import re
from typing import Any

from harness.models import Completion, CompletionParams, ModelError
from harness.models.scripted import ScriptedModel
from harness.reactions import reports_error
from harness.specs.persona import Behaviour, Persona, PersonaRule, PersonaWhen
from harness.specs.script import Script
from harness.specs.task import Scenario
from harness.transcript import Message, ToolSpec, Usage

PUSH_BACK = "That is not good enough. Please check again and do what I asked."
# the first message again (the request and the facts it gave): read as a rephrase, an overlap
# with an earlier turn, however many facts the opening held
REPHRASE = "Let me put it another way: {opening}"
PIVOT = "Never mind that, then. What else can you do for me?"
ABANDON = "Forget it. {stop}"
ACCEPT = "OK, I understand. Thanks anyway. {stop}"
ASK_BACK = "Sorry, why do you need that? What do you mean?"
ALL_TOLD = "That is everything I know."
DONE = "No, that's all, thanks. {stop}"
REACTIONS = ("pushback", "rephrase", "pivot", "abandon", "accept")
# The scenario speaks to the user ("You want ..."); the user speaks for themself ("I want ...").
_FIRST_PERSON = {
    "you are": "I am",
    "you were": "I was",
    "you're": "I'm",
    "you've": "I've",
    "you'd": "I'd",
    "you'll": "I'll",
    "yourself": "myself",
    "yours": "mine",
    "your": "my",
    "you": "I",
}
_SECOND_PERSON = re.compile(
    r"\b(" + "|".join(re.escape(k) for k in _FIRST_PERSON) + r")\b", re.IGNORECASE
)


def as_user(text: str) -> str:
    """The scenario's second-person `reason` in the user's own words (first person)."""

    def flip(match: re.Match[str]) -> str:
        said = _FIRST_PERSON[re.sub(r"\s+", " ", match.group(0).lower())]
        start = match.start() == 0 or text[: match.start()].rstrip().endswith((".", "!", "?"))
        return said[0].upper() + said[1:] if start else said

    return _SECOND_PERSON.sub(flip, text).strip()


def first_share(behaviour: Behaviour, facts: int) -> int:
    """How many of `facts` the first message gives: `disclosure_first` of them, rounded half up."""
    return min(facts, math.floor(behaviour.disclosure_first * facts + 0.5))


def fact_name(key: str) -> str:
    """A `known_info` key as words: `account_id` -> `account id`."""
    return re.sub(r"[_\W]+", " ", key).strip()


def say_fact(key: str, value: str) -> str:
    """One fact in the user's words."""
    return f"My {fact_name(key)} is {value}."


def given(scenario: Scenario, own: list[str]) -> set[str]:
    """The keys of the facts whose value appears in the user's messages."""
    said = "\n".join(own).casefold()
    return {key for key, value in scenario.known_info.items() if value.casefold() in said}


def asked_for(question: str, keys: list[str]) -> str:
    """The fact among `keys` (not yet given, in order) that the agent's question names, by the
    most words of its name found in the question; the first when it names none."""
    words = set(re.findall(r"\w+", question.casefold()))

    def named(key: str) -> int:
        return sum(word in words for word in fact_name(key).casefold().split())

    return max(keys, key=lambda key: (named(key), -keys.index(key)))


def percent(rate: float) -> str:
    """A rate as a whole percentage: 0.6 -> '60%'."""
    return f"{round(rate * 100)}%"


def behaviour_instructions(
    behaviour: Behaviour, scenario: Scenario, stop_signal: str, patience: int
) -> str:
    """The behaviour as instructions for a model playing the user: what to do, how often, with
    the numbers measured on real users and up to 3 of their messages as style samples."""
    facts = list(scenario.known_info)
    names = ", ".join(fact_name(key) for key in facts)
    first = first_share(behaviour, len(facts))
    lines = ["How you behave (measured on real users like you; follow these numbers):"]
    if facts:
        opening = "all" if first == len(facts) else f"{first} of the"
        lines.append(
            f"- In your first message give {opening} {len(facts)} facts you know ({names}). "
            "When the agent asks for something, give exactly one more fact: the one it asks "
            "for, else the next one."
        )
    if behaviour.clarify_rate:
        lines.append(
            f"- In {percent(behaviour.clarify_rate)} of your answers to the agent's questions, "
            "ask back (what the agent means, why it needs something) instead of answering."
        )
    else:
        lines.append("- Answer the agent's questions directly; do not ask back.")
    lines.append(
        "- When the agent refuses, reports an error or says it cannot do something (an apology "
        "alone is not a refusal): push back and "
        f"insist in {percent(behaviour.pushback_rate)} of cases, restate your request in other "
        f"words in {percent(behaviour.rephrase_rate)}, drop it and ask for something else in "
        f"{percent(behaviour.pivot_rate)}, leave without a solution in "
        f"{percent(behaviour.abandon_rate)} (say so, e.g. 'Forget it.', and end with "
        f"{stop_signal}), and accept the answer in "
        f"the remaining {percent(behaviour.accept_rate)} (end with {stop_signal})."
    )
    lines.append(f"- Write at most {patience} messages; then give up.")
    if behaviour.words_per_turn:
        lines.append(f"- Write about {round(behaviour.words_per_turn)} words per message.")
    if behaviour.examples:
        lines.append("Messages real users like you wrote (match their style, not their content):")
        lines += [f"> {example}" for example in behaviour.examples[:3]]
    return "\n".join(lines)


class BehaviourPlayer:
    """Plays a scripted persona that has a `behaviour`, as a `ChatModel` reading the
    conversation as the simulated user sees it (the agent's words as `user` messages)."""

    def __init__(
        self, persona: Persona, scenario: Scenario, stop_signal: str, seed: int, trial: int
    ):
        assert persona.behaviour is not None
        self.behaviour = persona.behaviour
        self.scenario = scenario
        self.stop = stop_signal
        self.rng = random.Random(f"behaviour:{seed}:{trial}")
        self.name = f"persona:{persona.name}"
        variables = {"known": scenario.known_info}
        rules = [rule for rule in persona.scripted_turns if rule.when != PersonaWhen()]
        fallback = [rule for rule in persona.scripted_turns if rule.when == PersonaWhen()]
        self.rules, self.fallback = (self._script(r, variables) for r in (rules, fallback))

    def _script(self, rules: list[PersonaRule], variables: dict[str, Any]) -> ScriptedModel | None:
        if not rules:
            return None
        return ScriptedModel(Script(kind="script", rules=list(rules)), variables, name=self.name)

    async def complete(
        self, messages: list[Message], tools: list[ToolSpec], params: CompletionParams
    ) -> Completion:
        text = self.reply(messages)
        message = Message(role="assistant", content=text)
        return Completion(message=message, usage=Usage(), model=self.name)

    def reply(self, messages: list[Message]) -> str:
        """The user's next message for the conversation as the user sees it: a conditional
        rule's, else the behaviour's, else a fallback rule's, else the closing message."""
        said = self._rule(self.rules, messages)
        said = said if said is not None else self.behave(messages)
        said = said if said is not None else self._rule(self.fallback, messages)
        return said if said is not None else DONE.format(stop=self.stop)

    @staticmethod
    def _rule(script: ScriptedModel | None, messages: list[Message]) -> str | None:
        if script is None:
            return None
        try:
            return script.reply(messages).content
        except ModelError:  # no rule applies
            return None

    def behave(self, messages: list[Message]) -> str | None:
        """What the behaviour says here, or None when it says nothing (the fallback rules or
        the end follow)."""
        turns = [m for m in messages if m.role != "system"]
        own = [m.content for m in turns if m.role == "assistant"]
        keys = [key for key in self.scenario.known_info if key not in given(self.scenario, own)]
        if not own:
            return self.opening(keys)
        agent = turns[-1].content if turns[-1].role == "user" else ""
        if reports_error(agent):  # what the measures count as an error event: not an apology
            return self.react(own[0])
        if "?" not in agent:
            return None
        if self.behaviour.clarify_rate and self.rng.random() < self.behaviour.clarify_rate:
            return ASK_BACK
        if keys:
            key = asked_for(agent, keys)
            return say_fact(key, self.scenario.known_info[key])
        return None

    def opening(self, keys: list[str]) -> str:
        """The first message: the request and `disclosure_first` of the facts (those the
        request itself states count among them)."""
        request = as_user(self.scenario.reason)
        stated = given(self.scenario, [request])
        count = first_share(self.behaviour, len(self.scenario.known_info)) - len(stated)
        left = [key for key in keys if key not in stated]
        facts = [say_fact(key, self.scenario.known_info[key]) for key in left[: max(0, count)]]
        return " ".join([request, *facts]).strip()

    def react(self, opening: str) -> str:
        """The reaction to an agent error or refusal, drawn by the behaviour's rates; a
        rephrase restates the user's `opening`."""
        rates = [
            self.behaviour.pushback_rate,
            self.behaviour.rephrase_rate,
            self.behaviour.pivot_rate,
            self.behaviour.abandon_rate,
            self.behaviour.accept_rate,
        ]
        reaction = self.rng.choices(REACTIONS, weights=rates)[0] if sum(rates) else "accept"
        return {
            "pushback": PUSH_BACK,
            "rephrase": REPHRASE.format(opening=opening),
            "pivot": PIVOT,
            "abandon": ABANDON.format(stop=self.stop),
            "accept": ACCEPT.format(stop=self.stop),
        }[reaction]

"""The simulated user: a model (or scripted rules) playing a persona with the task's goal.

The simulator only ever sees what the agent said: the agent's system prompt, tool calls and tool
results are stripped before its model is called. Roles are flipped for its model, so the agent's
words arrive as `user` messages and the simulated user's own words as `assistant` messages.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.models import ChatModel, CompletionParams, ModelError, ModelRuntime
from harness.models.scripted import ScriptedModel
from harness.specs.persona import Persona
from harness.specs.script import Script
from harness.specs.task import Scenario
from harness.transcript import Message, Usage

GREETING = "Hi! How can I help you today?"


@dataclass
class UserTurn:
    """What the simulated user said and what it cost."""

    content: str
    usage: Usage


def visible_to_user(messages: list[Message]) -> list[Message]:
    """The conversation as the user sees it: only user and assistant text, roles flipped."""
    flipped = {"user": "assistant", "assistant": "user"}
    return [
        Message(role=flipped[m.role], content=m.content)  # type: ignore[arg-type]
        for m in messages
        if m.role in flipped and m.content
    ]


def user_system_prompt(persona: Persona, scenario: Scenario, stop_signals: list[str]) -> str:
    """Instructions for the model that plays the user."""
    known = "\n".join(f"- {key}: {value}" for key, value in scenario.known_info.items()) or "- none"
    unknown = "\n".join(f"- {item}" for item in scenario.unknown_info) or "- none"
    traits = ", ".join(persona.traits) or "none in particular"
    transfer = stop_signals[1] if len(stop_signals) > 1 else stop_signals[0]
    return f"""You are playing a customer talking to a support agent. Stay in character: you are \
the customer, never the agent. Write only the customer's next message.

Who you are: {persona.description or persona.name}
Traits: {traits}
How you write: {persona.style or "naturally"}

Why you are contacting support: {scenario.reason}
{scenario.instructions}

Facts you know and may share when asked (do not volunteer all at once):
{known}

Things you do not know; never invent them:
{unknown}

When your goal is reached, or you give up, end your message with {stop_signals[0]}.
If you are transferred to a human, reply with {transfer}.
If you run out of patience after {persona.patience} replies, give up."""


class UserSimulator:
    """Plays one persona in one scenario; `reply` gives the user's next message."""

    def __init__(
        self,
        persona: Persona,
        scenario: Scenario,
        stop_signals: list[str],
        runtime: ModelRuntime,
        seed: int = 0,
        trial: int = 0,
    ):
        self.persona = persona
        self.system_prompt = user_system_prompt(persona, scenario, stop_signals)
        self.params = CompletionParams(temperature=persona.temperature, seed=seed, trial=trial)
        self.model: ChatModel
        if persona.model == "scripted":
            script = Script(kind="script", rules=persona.scripted_turns)
            variables = {"known": scenario.known_info}
            self.model = ScriptedModel(script, variables, name=f"persona:{persona.name}")
        else:
            self.model = runtime.model(persona.model, role="user simulator")

    async def reply(self, messages: list[Message]) -> UserTurn:
        """The user's next message given the conversation so far."""
        visible = visible_to_user(messages)
        prompt = [Message(role="system", content=self.system_prompt), *visible]
        completion = await self.model.complete(prompt, [], self.params)
        text = completion.message.content.strip()
        if not text:
            raise ModelError(f"persona '{self.persona.name}' gave an empty message")
        return UserTurn(text, completion.usage)

"""The simulated user: a model (or scripted rules) playing a persona with the task's goal.

The simulator only ever sees what the agent said: the agent's system prompt, tool calls and tool
results are stripped before its model is called. Roles are flipped for its model, so the agent's
words arrive as `user` messages and the simulated user's own words as `assistant` messages.

A reply that is empty or out of character (the model answering as the agent, echoing it, or
emitting tool calls) is retried once with a correction, and otherwise raised as a
`UserSimulatorError`: a failure of the simulator, never of the agent under test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from harness.domains import Environment
from harness.models import ChatModel, CompletionParams, ModelRuntime
from harness.models.scripted import ScriptedModel
from harness.sim.user_behaviour import BehaviourPlayer, behaviour_instructions
from harness.specs.persona import Persona
from harness.specs.script import Script
from harness.specs.task import Scenario
from harness.transcript import Message, Usage

GREETING = "Hi! How can I help you today?"
NO_REPLY = "(The agent did not reply.)"
GIVE_UP = "I've waited long enough, I give up."
# Things only the agent would say: a user model that writes them has broken character. A
# speaker label such as "Agent:" or "AI assistant:" (up to two qualifying words, not a greeting
# like "Hi agent:") opens the agent's words.
AGENT_VOICE = re.compile(
    r"^\s*(?!(?:hi|hello|hey|dear)\b)(?:[\w-]+\s+){0,2}(?:agent|assistant)\s*:"
    r"|how (can|may) i (help|assist) you"
    r"|is there anything else i can (help|do)"
    r"|as an ai\b|<tool_call>",
    re.IGNORECASE,
)


class UserSimulatorError(Exception):
    """The simulated user could not produce a valid turn."""


@dataclass
class UserTurn:
    """What the simulated user said, what it cost, and why it ended the episode if it did."""

    content: str
    usage: Usage = field(default_factory=Usage)
    gave_up: bool = False


def visible_to_user(messages: list[Message]) -> list[Message]:
    """The conversation as the user sees it: only user and assistant text, roles flipped. An
    agent turn without any text shows as a note, so the user model always answers the agent."""
    visible: list[Message] = []
    for message in messages:
        if message.role == "user":
            visible.append(Message(role="assistant", content=message.content))
        elif message.role == "assistant" and message.content:
            visible.append(Message(role="user", content=message.content))
    if visible and visible[-1].role == "assistant":
        visible.append(Message(role="user", content=NO_REPLY))
    return visible


def user_system_prompt(
    persona: Persona,
    scenario: Scenario,
    stop_signals: list[str],
    domain: type[Environment] | None = None,
) -> str:
    """Instructions for the model that plays the user: the persona, the task's goal and, when
    the domain describes itself, the setting. The agent's policy is not the user's to know."""
    known = "\n".join(f"- {key}: {value}" for key, value in scenario.known_info.items()) or "- none"
    unknown = "\n".join(f"- {item}" for item in scenario.unknown_info) or "- none"
    traits = ", ".join(persona.traits) or "none in particular"
    transfer = stop_signals[1] if len(stop_signals) > 1 else stop_signals[0]
    setting = f"\nThe setting: {domain.description}\n" if domain and domain.description else ""
    behaviour = persona.behaviour
    sharing = "may share when asked (do not volunteer all at once)"
    if behaviour is not None:
        sharing = "may share as 'How you behave' below says"
    prompt = f"""You are playing a user talking to an agent. Stay in character: you are the user, \
never the agent. Write only the user's next message.
{setting}
Who you are: {persona.description or persona.name}
Traits: {traits}
How you write: {persona.style or "naturally"}

Why you are contacting the agent: {scenario.reason}
{scenario.instructions}

Facts you know and {sharing}:
{known}

Things you do not know; never invent them:
{unknown}

When your goal is reached, or you give up, end your message with {stop_signals[0]}.
If you are transferred to a human, reply with {transfer}.
If you run out of patience after {patience(persona)} replies, give up."""
    if behaviour is None:
        return prompt
    rendered = behaviour_instructions(behaviour, scenario, stop_signals[0], patience(persona))
    return f"{prompt}\n\n{rendered}"


def patience(persona: Persona) -> int:
    """How many turns the user waits before giving up: the behaviour's, when it gives one."""
    if persona.behaviour is not None and persona.behaviour.patience is not None:
        return persona.behaviour.patience
    return persona.patience


def out_of_character(text: str, agent_said: str) -> str | None:
    """Why a reply cannot be the user's, or None when it can."""
    if not text.strip():
        return "the reply is empty"
    if AGENT_VOICE.search(text):
        return "the reply speaks as the agent"
    if agent_said and text.strip() == agent_said.strip():
        return "the reply repeats the agent's message"
    return None


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
        domain: type[Environment] | None = None,
    ):
        self.persona = persona
        self.stop_signals = stop_signals
        self.system_prompt = user_system_prompt(persona, scenario, stop_signals, domain)
        self.params = CompletionParams(temperature=persona.temperature, seed=seed, trial=trial)
        self.replies = 0
        self.model: ChatModel
        if persona.model.id == "scripted" and persona.behaviour is not None:
            self.model = BehaviourPlayer(persona, scenario, stop_signals[0], seed, trial)
        elif persona.model.id == "scripted":
            script = Script(kind="script", rules=list(persona.scripted_turns))
            variables = {"known": scenario.known_info}
            self.model = ScriptedModel(script, variables, name=f"persona:{persona.name}")
        else:
            self.model = runtime.model(persona.model, role="user simulator")

    async def reply(self, messages: list[Message], agent_turns: int) -> UserTurn:
        """The user's next message. After `patience` agent turns the user gives up."""
        if agent_turns >= patience(self.persona):
            return UserTurn(f"{GIVE_UP} {self.stop_signals[0]}", gave_up=True)
        visible = visible_to_user(messages)
        agent_said = visible[-1].content if visible and visible[-1].role == "user" else ""
        prompt = [Message(role="system", content=self.system_prompt), *visible]
        usage = Usage()
        for attempt in range(2):
            completion = await self.model.complete(prompt, [], self.params)
            usage.add(completion.usage)
            text = completion.message.content.strip()
            problem = "the reply calls tools" if completion.message.tool_calls else None
            problem = problem or out_of_character(text, agent_said)
            if problem is None:
                self.replies += 1
                return UserTurn(text, usage)
            if attempt == 0:
                correction = (
                    f"Your last reply was invalid ({problem}). You are the user: "
                    "write only the user's next message."
                )
                prompt = [*prompt, Message(role="system", content=correction)]
        raise UserSimulatorError(f"persona '{self.persona.name}': {problem}, twice")

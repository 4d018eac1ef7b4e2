"""The one record every part of the harness shares: a conversation and how it ended.

A simulated episode and a production trace both reduce to a `Transcript`; graders read only
Transcripts. This module imports nothing else of the harness.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]


class ToolSpec(BaseModel):
    """A tool as offered to a model: the same shape every provider converts from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Tool name the model calls it by.")
    description: str = Field(default="", description="What the tool does, shown to the model.")
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="JSON Schema of the tool's arguments object.",
    )


class ToolCall(BaseModel):
    """A model's request to run one tool."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="Identifier pairing the call with its result message.")
    name: str = Field(description="Name of the tool called.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Decoded arguments.")


class Message(BaseModel):
    """One message of a conversation in the harness's internal shape."""

    model_config = ConfigDict(extra="forbid")

    role: Role = Field(description="Who wrote the message.")
    content: str = Field(default="", description="Text of the message (tool output for tools).")
    tool_calls: list[ToolCall] = Field(
        default_factory=list, description="Tool calls requested by an assistant message."
    )
    tool_call_id: str | None = Field(
        default=None, description="For a tool message: the id of the call it answers."
    )
    name: str | None = Field(default=None, description="For a tool message: the tool's name.")
    is_error: bool = Field(
        default=False, description="For a tool message: the tool raised and this is its error."
    )


class Usage(BaseModel):
    """Tokens, cost and time spent by model calls."""

    model_config = ConfigDict(extra="forbid")

    calls: int = Field(default=0, description="Number of model calls.")
    input_tokens: int = Field(default=0, description="Prompt tokens.")
    output_tokens: int = Field(default=0, description="Completion tokens.")
    cost_usd: float = Field(default=0.0, description="Cost in US dollars.")
    latency_s: float = Field(default=0.0, description="Summed wall time of the calls in seconds.")
    cached_calls: int = Field(default=0, description="Calls answered from the response cache.")
    unpriced: list[str] = Field(
        default_factory=list,
        description="Models called that have no price: their calls count as $0, so the cost "
        "is a lower bound and a cost budget cannot pass on it.",
    )

    def add(self, other: Usage) -> None:
        """Accumulate another usage record into this one."""
        self.unpriced = sorted({*self.unpriced, *other.unpriced})
        self.calls += other.calls
        self.cached_calls += other.cached_calls
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cost_usd += other.cost_usd
        self.latency_s += other.latency_s


class EndReason(StrEnum):
    """Why an episode ended."""

    USER_STOP = "user_stop"
    TRANSFER = "transfer"
    OUT_OF_SCOPE = "out_of_scope"
    AGENT_HANDOFF = "agent_handoff"
    # the agent failed (its code raised, it returned no reply, its own service failed): graded
    # as a fail; `harness.sim.agent` says what counts
    AGENT_CRASH = "agent_crash"
    MAX_TURNS = "max_turns"
    TIMEOUT = "timeout"
    ERROR = "error"


class Side(StrEnum):
    """Which part of an episode or of its grading failed. An episode's `agent` side is the
    agent's own failure (end reason `agent_crash`, graded as a fail); every other side is
    missing evidence (an `error` verdict). `harness.sim.agent` says which is which."""

    AGENT = "agent"
    AGENT_MODEL = "agent_model"  # the agent's model endpoint: its provider, or a rate limit
    USER_SIMULATOR = "user_simulator"
    TOOL = "tool"
    ENVIRONMENT = "environment"
    JUDGE = "judge"
    CHECKER = "checker"
    HARNESS = "harness"


class EpisodeError(BaseModel):
    """A failure that stopped an episode, recorded as data instead of a pass or a fail."""

    model_config = ConfigDict(extra="forbid")

    side: Side = Field(description="The side that failed.")
    message: str = Field(description="One-line reason.")
    detail: str = Field(
        default="", description="More on it: the last frames of the agent's code that crashed."
    )


class Transcript(BaseModel):
    """A whole episode: who played, what was said and done, the final state and how it ended."""

    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(description="Id of the task the episode played.")
    variant: str = Field(description="Name of the agent variant under test.")
    variant_hash: str = Field(description="Content hash of the resolved agent variant.")
    persona: str = Field(default="", description="Name of the simulated user's persona.")
    trial: int = Field(default=0, description="Trial index of this episode for its task.")
    seed: int = Field(default=0, description="Seed given to every model call of the episode.")
    messages: list[Message] = Field(default_factory=list, description="The conversation.")
    final_state: dict[str, Any] = Field(
        default_factory=dict, description="The environment's state when the episode ended."
    )
    usage: Usage = Field(default_factory=Usage, description="Usage of the agent's model calls.")
    user_usage: Usage = Field(
        default_factory=Usage, description="Usage of the simulated user's model calls."
    )
    turns: int = Field(default=0, description="Number of user turns the agent answered.")
    end_reason: EndReason = Field(description="Why the episode ended.")
    end_detail: str = Field(default="", description="More on the end: the signal, a give-up.")
    error: EpisodeError | None = Field(
        default=None,
        description="Set when end_reason is error (missing evidence) or agent_crash (the "
        "agent's failure).",
    )
    started_at: str = Field(default="", description="ISO-8601 start time.")
    duration_s: float = Field(default=0.0, description="Wall time of the episode in seconds.")

    def agent_failure(self) -> str | None:
        """Why the agent failed, when the episode ended in the agent's own failure (end reason
        `agent_crash`): the reason of its `fail` verdict. None for any other end."""
        if self.end_reason != EndReason.AGENT_CRASH:
            return None
        message = self.error.message if self.error else "unknown error"
        # a crash records its exception ("KeyError: 'x'"); other failures their whole sentence
        return message if message.startswith("the agent ") else f"the agent crashed: {message}"

    def assistant_texts(self) -> list[str]:
        """The agent's visible replies, in order, without empty tool-calling steps."""
        return [m.content for m in self.messages if m.role == "assistant" and m.content]

    def tool_calls(self) -> list[ToolCall]:
        """Every tool call the agent made, in order."""
        return [call for m in self.messages if m.role == "assistant" for call in m.tool_calls]

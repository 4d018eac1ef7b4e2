"""tau2's own evaluator on a harness episode: the transcript as a tau2 simulation, scored by
`tau2.evaluator.evaluator.evaluate_simulation`, to check that harness's verdicts are tau2's."""

from __future__ import annotations

import json
from typing import Any

from tau2.data_model.message import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage
from tau2.data_model.simulation import SimulationRun, TerminationReason
from tau2.data_model.tasks import Task as Tau2Task
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

from harness.transcript import Transcript

STOPPED = {"user_stop", "transfer", "out_of_scope"}  # tau2: the user ended the conversation
AGENT_STOPPED = {"agent_handoff"}


def tau2_messages(transcript: Transcript) -> list[Message]:
    """The conversation as tau2 records it. A tool's text result is the text itself (harness
    gives a tool's string result to the agent JSON-encoded; tau2 as it is)."""
    found: list[Message] = []
    for message in transcript.messages:
        if message.role == "assistant":
            calls = [
                ToolCall(id=c.id, name=c.name, arguments=c.arguments, requestor="assistant")
                for c in message.tool_calls
            ]
            found.append(
                AssistantMessage(
                    role="assistant", content=message.content or None, tool_calls=calls or None
                )
            )
        elif message.role == "user":
            found.append(UserMessage(role="user", content=message.content))
        elif message.role == "tool":
            found.append(
                ToolMessage(
                    id=message.tool_call_id or "",
                    role="tool",
                    content=_tool_text(message.content, message.is_error),
                    requestor="assistant",
                    error=message.is_error,
                )
            )
    return found


def _tool_text(content: str, is_error: bool) -> str:
    if is_error:
        return content
    try:
        value: Any = json.loads(content)
    except ValueError:
        return content
    return value if isinstance(value, str) else content


def termination(transcript: Transcript) -> TerminationReason:
    """How tau2 would say the episode ended."""
    reason = str(transcript.end_reason)
    if reason in STOPPED:
        return TerminationReason.USER_STOP
    if reason in AGENT_STOPPED:
        return TerminationReason.AGENT_STOP
    if reason == "max_turns":
        return TerminationReason.MAX_STEPS
    return TerminationReason.AGENT_ERROR


def tau2_reward(transcript: Transcript, task: Tau2Task, domain: str) -> float:
    """tau2's reward (1.0 or 0.0) for the episode, by tau2's evaluator (`ALL`: the database,
    the actions and the information communicated, as the task's reward basis says)."""
    simulation = SimulationRun(
        id=f"{transcript.task_id}/{transcript.trial}",
        task_id=task.id,
        start_time="",
        end_time="",
        duration=0.0,
        termination_reason=termination(transcript),
        messages=tau2_messages(transcript),
    )
    info = evaluate_simulation(simulation, task, EvaluationType.ALL, False, domain)
    return info.reward

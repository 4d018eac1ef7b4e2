"""The turn loop: start conditions, end conditions, limits and errors, ending in a Transcript.

A failure is recorded by the side it belongs to; which failures are the agent's (an
`agent_crash`, graded as a fail) and which are missing evidence (an `error`) is decided in
`harness.sim.agent`'s docstring."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from harness.defaults import OUT_OF_SCOPE_SIGNAL, STOP_SIGNAL, TRANSFER_SIGNAL
from harness.domains import Environment, ToolUnavailable
from harness.domains.trace_replay import make_environment
from harness.models import ModelRuntime
from harness.sim.agent import AgentCrashed, AgentFailed, AgentModelFailed, AgentRunner
from harness.sim.agent_code import agent_loop, loop_answers, replace_blocked_loop
from harness.sim.user import GREETING, UserSimulator
from harness.specs.persona import Persona
from harness.specs.task import Task
from harness.tracing import child_span
from harness.transcript import (
    EndReason,
    EpisodeError,
    Message,
    Side,
    Transcript,
    Usage,
)

SIGNAL_REASONS = {
    STOP_SIGNAL: EndReason.USER_STOP,
    TRANSFER_SIGNAL: EndReason.TRANSFER,
    OUT_OF_SCOPE_SIGNAL: EndReason.OUT_OF_SCOPE,
}


class _SideFailed(Exception):
    """A failure attributed to one side of the episode (missing evidence: an `error`)."""

    def __init__(self, side: Side, cause: BaseException, named: bool = True):
        super().__init__(f"{type(cause).__name__}: {cause}" if named else str(cause))
        self.side = side


@dataclass
class EpisodeSpec:
    """Everything one episode needs."""

    task: Task
    persona: Persona
    agent: AgentRunner
    variant_hash: str
    initial_state: dict[str, Any]
    trial: int = 0
    seed: int = 0
    runtime: ModelRuntime = field(default_factory=ModelRuntime)
    domain: type[Environment] | None = None  # resolved once by the suite (None: resolve it)


def episode_seed(task_id: str, trial: int) -> int:
    """The seed of a task's trial: the same for every variant, so A/B runs are paired."""
    return int.from_bytes(hashlib.sha256(f"{task_id}:{trial}".encode()).digest()[:4], "big")


def stop_reason(text: str, signals: list[str]) -> EndReason | None:
    """The end reason a user message signals, if any."""
    for signal in signals:
        if signal in text:
            return SIGNAL_REASONS.get(signal, EndReason.USER_STOP)
    return None


async def _not_answered(agent: AgentRunner, seconds: float) -> str:
    """Why a python agent's turn ran out of time (its code is abandoned, still running in its
    daemon thread): when async code blocks the agent event loop, that loop is given up and the
    reason says so, since every async agent's code waits behind it."""
    message = f"the agent did not answer within {seconds:g} s (the task's end.max_seconds)"
    function = getattr(agent, "function", None)
    if inspect.iscoroutinefunction(function):
        loop = agent_loop()
        if not await loop_answers(loop):
            replace_blocked_loop(loop)
            message += "; blocking code in its async def stops its event loop (time.sleep?)"
    return message


async def run_episode(spec: EpisodeSpec) -> Transcript:
    """Play one episode to its end. Never raises: failures become an `error` end reason."""
    task = spec.task
    messages: list[Message] = [m.model_copy() for m in task.start.history]
    agent_usage, user_usage = Usage(), Usage()
    state: dict[str, Any] = {}
    turns = 0
    detail = ""
    answering = False  # the agent is answering a turn (what a time limit interrupts)
    started, clock = datetime.now(UTC), time.perf_counter()

    async def play() -> EndReason:
        nonlocal turns, state, detail, answering
        try:
            env = make_environment(task, spec.initial_state, spec.domain)
        except Exception as exc:
            raise _SideFailed(Side.ENVIRONMENT, exc) from exc
        state = env.state
        user = UserSimulator(
            spec.persona,
            task.scenario,
            task.end.stop_signals,
            spec.runtime,
            spec.seed,
            spec.trial,
            domain=type(env),
        )

        async def user_says() -> EndReason | None:
            nonlocal detail
            try:
                said = await user.reply(messages, turns)
            except Exception as exc:
                raise _SideFailed(Side.USER_SIMULATOR, exc) from exc
            user_usage.add(said.usage)
            messages.append(Message(role="user", content=said.content))
            ended = stop_reason(said.content, task.end.stop_signals)
            if said.gave_up:
                detail = f"the user gave up after {turns} agent turns (patience)"
            elif ended is not None:
                detail = next(s for s in task.end.stop_signals if s in said.content)
            return ended

        if task.start.first_message is not None:
            messages.append(Message(role="user", content=task.start.first_message))
        elif not messages or messages[-1].role != "user":
            messages.append(Message(role="assistant", content=GREETING))
            if (ended := await user_says()) is not None:
                return ended
        while True:
            first_new = len(messages)
            with child_span(
                "harness.turn", {"turn": turns + 1, "user": messages[-1].content}
            ) as turn:
                try:
                    answering = True
                    agent_usage.add(await spec.agent.respond(messages, env, spec.seed, spec.trial))
                    answering = False
                except ToolUnavailable as exc:  # a tool's infrastructure, under every runner
                    raise _SideFailed(Side.TOOL, exc) from exc
                except AgentModelFailed as exc:  # the agent's provider: not the agent's failure
                    raise _SideFailed(Side.AGENT_MODEL, exc, named=False) from exc
                # AgentFailed is the agent's failure (below); anything else, the harness's bug
                turn.output = {
                    "assistant": [
                        m.content
                        for m in messages[first_new:]
                        if m.role == "assistant" and m.content
                    ]
                }
            turns += 1
            if env.done:
                return EndReason.AGENT_HANDOFF
            if turns >= task.end.max_turns:
                return EndReason.MAX_TURNS
            if (ended := await user_says()) is not None:
                return ended

    error: EpisodeError | None = None
    try:
        end = await asyncio.wait_for(play(), timeout=task.end.max_seconds)
    except TimeoutError:
        end = EndReason.TIMEOUT
        # the user's code is stuck (not a tool it called: its call is the last message)
        in_tool = bool(messages) and bool(messages[-1].tool_calls)
        if answering and not in_tool and spec.agent.variant.runner == "python":
            message = await _not_answered(spec.agent, task.end.max_seconds)
            end, error = EndReason.AGENT_CRASH, EpisodeError(side=Side.AGENT, message=message)
    except _SideFailed as failed:
        end, error = EndReason.ERROR, EpisodeError(side=failed.side, message=str(failed))
    except AgentFailed as failed:  # graded as a fail (`Transcript.agent_failure`)
        frames = "\n".join(failed.frames) if isinstance(failed, AgentCrashed) else ""
        end = EndReason.AGENT_CRASH
        error = EpisodeError(side=Side.AGENT, message=str(failed), detail=frames)
    except Exception as exc:  # a bug of the harness itself is still recorded, not raised
        end = EndReason.ERROR
        error = EpisodeError(side=Side.HARNESS, message=f"{type(exc).__name__}: {exc}")
    return Transcript(
        task_id=task.id,
        variant=spec.agent.variant.name,
        variant_hash=spec.variant_hash,
        persona=spec.persona.name,
        trial=spec.trial,
        seed=spec.seed,
        messages=messages,
        final_state=state,
        usage=agent_usage,
        user_usage=user_usage,
        turns=turns,
        end_reason=end,
        end_detail=detail,
        error=error,
        started_at=started.isoformat(timespec="seconds"),
        duration_s=round(time.perf_counter() - clock, 6),
    )

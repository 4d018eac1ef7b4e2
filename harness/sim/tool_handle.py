"""What a python agent gets to use the environment's tools (`tools` in `respond(conversation,
tools)`), and how any runner runs one call: every call recorded in the transcript, a refusal a
`ToolError` the agent may act on, a bug of the tool's code a `ToolCrashed` (a `ToolError` too),
an infrastructure failure (`ToolUnavailable`) the end of the turn as the tool side's error."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from harness.domains import (
    Environment,
    ToolCrashed,
    ToolError,
    ToolOutcome,
    ToolUnavailable,
)
from harness.models.wire_openai import to_wire_tools
from harness.specs.agent import AgentVariant
from harness.transcript import Message, ToolCall


async def tool_outcome(env: Environment, call: ToolCall, allowed: bool = True) -> ToolOutcome:
    """Run a call on the environment (unless the agent may not use the tool): its outcome."""
    if allowed:
        return await env.call(call.name, call.arguments)
    return ToolOutcome(f"Error: unknown tool '{call.name}'", is_error=True)


def tool_message(call: ToolCall, outcome: ToolOutcome) -> Message:
    """A call's outcome as the transcript records it."""
    return Message(
        role="tool", tool_call_id=call.id, name=call.name, content=outcome.content,
        is_error=outcome.is_error,
    )  # fmt: skip


async def tool_result(env: Environment, call: ToolCall, allowed: bool = True) -> Message:
    """Run a call on the environment (unless the agent may not use the tool): its result."""
    return tool_message(call, await tool_outcome(env, call, allowed))


class ToolHandle:
    """What a python agent gets to use the environment's tools; every call is recorded.

    Agent code runs off the harness's event loop (`harness.sim.agent_code`), so both ways of
    calling a tool work from either kind of agent: `tools.call(...)` blocks until the result
    is back, `await tools.acall(...)` does not. In `async def respond`, prefer `acall`: `call`
    works there too, but blocks the agent event loop (every async agent's) while the tool runs.

    `failure` is the first infrastructure failure of a tool call (`ToolUnavailable`), or None:
    once set, the environment is not trusted any more, every further call raises it again
    without running, and the runner ends the turn with it, whatever the agent's code did."""

    def __init__(
        self,
        variant: AgentVariant,
        env: Environment,
        messages: list[Message],
        loop: asyncio.AbstractEventLoop,
    ):
        self.variant = variant
        self.policy = type(env).policy
        self.system_prompt = variant.full_system_prompt(type(env))
        self.specs = to_wire_tools(variant.described(env.tool_specs(variant.tools or None)))
        self.names = [spec["function"]["name"] for spec in self.specs]
        self._env, self._messages, self._loop = env, messages, loop  # the harness's loop
        self.failure: ToolUnavailable | None = None
        self.closed = False  # the turn is over: a late call of abandoned agent code is refused

    async def acall(self, name: str, /, **arguments: Any) -> Any:
        """Run a tool (async agents). Returns its JSON result; raises ToolError on a refusal
        and ToolUnavailable (or ToolTimeout) when the tool's infrastructure failed."""
        if _running_loop() is self._loop:  # called by the harness itself (tests, `tool_result`)
            return await self._run(name, arguments)
        # from the agent loop: the tool runs on the harness's loop, which owns the environment
        return await asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(self._run(name, arguments), self._loop)
        )

    def call(self, name: str, /, **arguments: Any) -> Any:
        """Run a tool and wait for its result (sync agents; also works in async ones, see the
        class's docstring). Returns and raises as `acall` does."""
        if _running_loop() is self._loop:  # would wait on itself for ever
            raise RuntimeError(
                "tools.call ran on the harness's event loop; use `await tools.acall(...)`"
            )
        if self.closed or self._loop.is_closed():  # abandoned code, after its episode ended
            raise RuntimeError(f"tool '{name}' called after the agent's turn was over")
        return asyncio.run_coroutine_threadsafe(self._run(name, arguments), self._loop).result()

    async def _run(self, name: str, arguments: dict[str, Any]) -> Any:
        """Record and run one call on the environment (on the harness's loop)."""
        if self.closed:
            raise RuntimeError(f"tool '{name}' called after the agent's turn was over")
        if self.failure is not None:
            raise self.failure
        call = ToolCall(
            id=f"call_{sum(len(m.tool_calls) for m in self._messages)}",
            name=name,
            arguments=arguments,
        )
        self._messages.append(Message(role="assistant", tool_calls=[call]))
        try:
            outcome = await tool_outcome(self._env, call, name in self.names)
        except ToolUnavailable as exc:
            self.failure = self.failure or exc
            raise
        self._messages.append(tool_message(call, outcome))
        refusal = outcome.content.removeprefix("Error: ")
        if outcome.crash:  # the tool's own bug: a ToolError to the code, the tool's if let through
            raise ToolCrashed(refusal, outcome.crash)
        if outcome.is_error:
            raise ToolError(refusal)
        return json.loads(outcome.content)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def tool_bug(exc: BaseException | None) -> ToolCrashed | None:
    """The tool's crash that an agent's exception is, or was raised while handling."""
    while exc is not None and not isinstance(exc, ToolCrashed):
        exc = exc.__cause__ or exc.__context__
    return exc

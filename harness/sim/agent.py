"""Agents under test, one runner per kind, chosen by the variant's `runner`:

- `llm`: the built-in tool-calling loop driven by the variant (prompt, skills, tools, model); the
  prompt's `{domain.policy}` and `{domain.description}` are those of the task's domain.
- `python`: your own code, `entry: module:function` (sync or async), called once per user turn
  as `function(conversation, tools)`:
    * `conversation` is a list of `{"role": "user" | "assistant", "content": str}` dicts, the
      visible conversation so far, newest last;
    * `tools` is a `ToolHandle`: `tools.specs` (OpenAI-format tool schemas), `tools.variant`
      (the resolved variant: system prompt, skills, parameters), `tools.system_prompt` (the
      variant's prompt and skills as the llm runner sends them, `{domain.policy}` and
      `{domain.description}` filled), `tools.policy` (the domain's policy, the rules the judge
      holds the agent to; "" when it has none), and `tools.call(name, **args)` /
      `await tools.acall(name, **args)` (either works from sync or async code; prefer `acall`
      in async code), which run a tool of the environment, record the call in the
      transcript, and return its JSON result or raise `ToolError` with the environment's
      refusal;
    * it returns the assistant's reply: a string, or a dict whose `content` is a string.
  Your code never runs on the harness's event loop (`harness.sim.agent_code`): a sync function
  runs in a daemon thread, an async one on the agent event loop, so code that blocks or loops
  for ever still ends at the task's `end.max_seconds` (`the agent did not answer within 10 s`),
  and Ctrl-C still stops the run. An exception of your code is an agent crash, located at the
  innermost frame of your code (`the agent crashed: agent.py:21 in respond: KeyError: 'id'`);
  but once a tool's infrastructure failed (`ToolUnavailable`, `ToolTimeout`),
  the turn ends as an error of the tool side whatever your code does with the exception (lets
  it through, raises another, or swallows it and replies), and no further tool runs.
- `http`: your agent service behind an OpenAI-compatible chat endpoint (`model.base_url`); it is
  sent the visible conversation and runs its tools server-side. The harness sees only its replies,
  unless the variant sets `reports_tool_calls`: then the reply message's `tool_calls` (OpenAI
  format) are the calls the service already ran for that turn; they are recorded and replayed on
  the task's environment, so that checks of tool calls and of the final state can grade them.

Under every runner, a tool's infrastructure failure (`ToolUnavailable`, of which `ToolTimeout`
is one) propagates out of `respond`, and the episode ends as an error of the tool side.

What counts against the agent (the one place this is decided; `harness.sim.episode` records it,
`harness.grading.normative` grades it):

- **The agent's failures** end the episode with `agent_crash` (side `agent`) and are graded as
  a `fail`, so every pass rate, comparison and gate counts them against the agent
  (`AgentFailed`):
    * `python`: the code raised (`the agent crashed: agent.py:21 in respond: KeyError: 'x'`),
      did not answer within the task's `end.max_seconds`, or returned something
      that is not a reply: None, a number, a dict without a string `content`
      (`the agent returned None, not a reply ...`);
    * `http`: the service, which is the agent, failed after the retries: a 5xx, any 4xx but
      429, no connection, no reply within the timeout, a reply that is not a valid completion
      (`the agent service failed: agent model openai/x: HTTP 500: ...`).
- **Missing evidence** is an `error` verdict: excluded from pass rates, never counted as a
  fail, played again by the gate. Of the agent runners (`AgentModelFailed`, side
  `agent_model`):
    * `llm`: any failed call of the agent's model after the retries (a rate limit, an outage,
      a refusal at OpenAI, Anthropic or any provider): the provider failed, not the agent
      (`the agent's model provider failed: agent model openai/x: HTTP 503: ... after 5
      attempts`);
    * `http`: the service still answering 429 (rate limited) after the retries.
  Elsewhere: a tool's infrastructure (`ToolUnavailable`: side `tool`), the environment, the user
  simulator and its model, a judge or checker that could not decide, and the harness's own bugs
  (side `harness`).
"""

from __future__ import annotations

import asyncio
import inspect
import reprlib
from collections.abc import Callable
from typing import Any, Protocol

from harness.domains import (
    Environment,
    ToolBroken,
)
from harness.imports import (
    UnresolvedReference,
    UserCodeError,
    defined_names,
    load_reference,
    module_file,
    split_reference,
)
from harness.models import ChatModel, CompletionParams, ModelError, ModelRuntime
from harness.models.base import unknown_provider
from harness.registry import Registry
from harness.sim.agent_code import run_async_agent, run_sync_agent, user_frames
from harness.sim.suite import code_problem
from harness.sim.tool_handle import ToolHandle, tool_bug, tool_result
from harness.specs.agent import AgentVariant, fill_domain
from harness.specs.load import Loaded
from harness.specs.located import SpecError, display
from harness.specs.validation import suggestion
from harness.transcript import Message, Usage


class AgentFailed(Exception):
    """The agent under test failed (see the module's docstring): its episode ends with
    `agent_crash` and is graded as a `fail`, whose reason is this message."""


class AgentCrashed(AgentFailed):
    """The agent's own code raised: a failure of the agent, not of the harness or a model. Its
    message is where (the innermost frame of the user's code), the exception's type and
    message; the verdict says `the agent crashed: ...`. `frames` are the last frames of the
    user's code, innermost first, kept in the stored error's detail."""

    def __init__(self, message: str, frames: list[str] | None = None):
        super().__init__(message)
        self.frames = frames or []


class AgentModelFailed(Exception):
    """The agent's model endpoint failed in a way that says nothing about the agent (see the
    module's docstring): missing evidence, an `error` of the `agent_model` side."""


class AgentRunner(Protocol):
    """Answers one user turn by appending the agent's messages to the conversation."""

    variant: AgentVariant

    async def respond(
        self, messages: list[Message], env: Environment, seed: int = 0, trial: int = 0
    ) -> Usage: ...


RUNNERS: Registry[Callable[[AgentVariant, ModelRuntime], AgentRunner]] = Registry("agent runner")


def make_agent(variant: AgentVariant, runtime: ModelRuntime) -> AgentRunner:
    """The runner the variant asks for."""
    factory = RUNNERS.get(variant.runner)
    if factory is None:
        raise LookupError(f"unknown agent runner '{variant.runner}'")
    return factory(variant, runtime)


def check_agent(loaded: Loaded[AgentVariant]) -> Loaded[AgentVariant]:
    """What an agent file names must exist before anything runs: its model's provider and, for
    runner 'python', the entry's module and function (read from the source, never run)."""
    variant, problems = loaded.spec, []
    unknown = unknown_provider(variant.model.id) if variant.model is not None else None
    if unknown is not None:
        problems.append(loaded.problem(("model", "id"), unknown))
    if variant.runner == "python" and variant.entry is not None:
        message = _entry_problem(variant.entry)
        if message is not None:
            problems.append(loaded.problem(("entry",), message))
    if problems:
        raise SpecError(problems)
    return loaded


def _entry_problem(entry: str) -> str | None:
    """Why an entry names no function, as far as the module's source tells; None if it may."""
    try:
        module, name = split_reference(entry)
        path = module_file(module)
    except UnresolvedReference as exc:
        return str(exc)
    try:
        names = defined_names(path.read_text(encoding="utf-8"), str(path))
    except SyntaxError as exc:
        return f"{display(path)} is not valid Python: {exc.msg} (line {exc.lineno})"
    except (OSError, UnicodeDecodeError, ValueError):  # compiled or unreadable: the import tells
        return None
    if names is None or name in names:
        return None
    known = sorted(n for n in names if not n.startswith("_"))
    hint = f"; {suggestion(name, known)}" if known else ""
    return f"{display(path)} defines no top-level function '{name}'{hint}"


def _params(variant: AgentVariant, seed: int, trial: int) -> CompletionParams:
    return CompletionParams(
        temperature=variant.parameters.temperature,
        max_tokens=variant.parameters.max_tokens,
        seed=seed,
        trial=trial,
    )


class LLMAgent:
    """Calls the model, runs the tools it asks for, until it replies in text or uses up its tool
    steps. Messages are appended to the shared conversation as they happen, so a failure
    mid-turn leaves a faithful partial transcript."""

    def __init__(self, variant: AgentVariant, model: ChatModel):
        self.variant = variant
        self.model = model
        self.system_prompt = variant.full_system_prompt()

    async def respond(
        self, messages: list[Message], env: Environment, seed: int = 0, trial: int = 0
    ) -> Usage:
        usage = Usage()
        tools = self.variant.described(env.tool_specs(self.variant.tools))
        params = _params(self.variant, seed, trial)
        system = fill_domain(self.system_prompt, type(env))  # the domain of the task played
        for _ in range(self.variant.parameters.max_tool_steps):
            prompt = [Message(role="system", content=system), *messages]
            try:
                completion = await self.model.complete(prompt, tools, params)
            except ModelError as exc:
                raise AgentModelFailed(f"the agent's model provider failed: {exc}") from exc
            usage.add(completion.usage)
            reply = completion.message
            messages.append(reply)
            if not reply.tool_calls:
                break
            for call in reply.tool_calls:
                messages.append(await tool_result(env, call, call.name in self.variant.tools))
            if env.done:
                break
        return usage


def load_entry(entry: str) -> Callable[..., Any]:
    """The function an entry names: 'file.py:function' or 'package.module:function'."""
    try:
        function = load_reference(entry)
    except UserCodeError as exc:  # the user's module does not import: bad input, at its line
        raise SpecError([code_problem(exc)]) from None
    if not callable(function):
        raise TypeError(f"entry '{entry}' is not a function")
    return function


class PythonAgent:
    """Your own agent code, called once per user turn."""

    def __init__(self, variant: AgentVariant, function: Callable[..., Any]):
        self.variant = variant
        self.function = function

    async def respond(
        self, messages: list[Message], env: Environment, seed: int = 0, trial: int = 0
    ) -> Usage:
        tools = ToolHandle(self.variant, env, messages, asyncio.get_running_loop())
        conversation = [
            {"role": m.role, "content": m.content}
            for m in messages
            if m.role in ("user", "assistant") and m.content
        ]
        reply: Any = None
        crashed: Exception | None = None
        try:
            if inspect.iscoroutinefunction(self.function):
                reply = await run_async_agent(self.function(conversation, tools))
            else:
                reply = await run_sync_agent(self.function, conversation, tools)
                if asyncio.iscoroutine(reply):  # a sync wrapper of async code (a partial)
                    reply = await run_async_agent(reply)
        except Exception as exc:  # pylint: disable=broad-exception-caught  # the agent's crash
            crashed = exc
        finally:  # also when the time limit cancelled the turn
            tools.closed = True
        if tools.failure is not None:
            # a tool's infrastructure failed: whether the code let it through, raised another
            # exception or replied anyway, the turn ends with it (the environment is suspect)
            raise tools.failure
        if (bug := tool_bug(crashed)) is not None:
            raise ToolBroken(bug.crash) from crashed  # the tool's code raised, not the agent's
        if crashed is not None:
            raise crash_of(crashed) from crashed
        messages.append(Message(role="assistant", content=reply_text(reply)))
        return Usage()


def crash_of(exc: BaseException) -> AgentCrashed:
    """The agent's crash, located: `agent.py:21 in respond: KeyError: 'id'` (the innermost
    frame of the user's code), with the last frames of the user's code as its `frames`."""
    frames = user_frames(exc)
    where = f"{frames[0]}: " if frames else ""
    return AgentCrashed(f"{where}{type(exc).__name__}: {exc}", frames)


REPLY = "a str, or a dict whose 'content' is a str"


def reply_text(reply: Any) -> str:
    """The text of what a python agent returned; `AgentFailed` naming it when it is no reply."""
    if isinstance(reply, str):
        return reply
    if isinstance(reply, dict):
        if isinstance(content := reply.get("content"), str):
            return content
        keys = ", ".join(reprlib.repr(key) for key in list(reply)[:8]) or "none"
        returned = (
            f"a dict whose 'content' is {_shown(content)}"
            if "content" in reply
            else f"a dict without 'content' (keys: {keys})"
        )
    else:
        returned = _shown(reply)
    raise AgentFailed(f"the agent returned {returned}, not a reply ({REPLY})")


def _shown(value: Any) -> str:
    """A value as a reason names it: its type and a short repr (`int 42`, `None`)."""
    return "None" if value is None else f"{type(value).__name__} {reprlib.repr(value)}"


class HTTPAgent:
    """Your agent service: it gets the visible conversation and answers in text; with
    `reports_tool_calls`, its reply's `tool_calls` are the calls it ran, recorded and replayed."""

    def __init__(self, variant: AgentVariant, model: ChatModel):
        self.variant = variant
        self.model = model

    async def respond(
        self, messages: list[Message], env: Environment, seed: int = 0, trial: int = 0
    ) -> Usage:
        system = self.variant.full_system_prompt(type(env))
        conversation = [Message(role="system", content=system)] if system else []
        conversation += [
            Message(role=m.role, content=m.content)
            for m in messages
            if m.role in ("user", "assistant") and m.content
        ]
        try:
            completion = await self.model.complete(
                conversation, [], _params(self.variant, seed, trial)
            )
        except ModelError as exc:  # after the runtime's retries
            if exc.status == 429:
                raise AgentModelFailed(f"the agent service is rate limited: {exc}") from exc
            raise AgentFailed(f"the agent service failed: {exc}") from exc
        ran = completion.message.tool_calls if self.variant.reports_tool_calls else []
        if ran:
            messages.append(Message(role="assistant", tool_calls=ran))
            for call in ran:  # one by one: a ToolUnavailable leaves the results before it
                messages.append(await tool_result(env, call))
        messages.append(Message(role="assistant", content=completion.message.content))
        return completion.usage


@RUNNERS.register("llm")
def _llm(variant: AgentVariant, runtime: ModelRuntime) -> AgentRunner:
    assert variant.model is not None
    return LLMAgent(variant, runtime.model(variant.model, role="agent"))


@RUNNERS.register("python")
def _python(variant: AgentVariant, runtime: ModelRuntime) -> AgentRunner:
    assert variant.entry is not None
    return PythonAgent(variant, load_entry(variant.entry))


@RUNNERS.register("http")
def _http(variant: AgentVariant, runtime: ModelRuntime) -> AgentRunner:
    assert variant.model is not None
    return HTTPAgent(variant, runtime.model(variant.model, role="agent"))

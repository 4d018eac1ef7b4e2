"""What `harness domains` and `harness schema domain` print: a domain's tools and state schema,
and the guide to the domain API that users' code is written against."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from harness.domains.base import (
    DOMAINS,
    Environment,
    ToolError,
    ToolTimeout,
    ToolUnavailable,
    register_domain,
    tool,
)
from harness.domains.trace_replay import TraceReplay
from harness.registry import source_of
from harness.transcript import ToolSpec


@dataclass
class DomainInfo:
    """A domain as a user sees it."""

    name: str
    source: str
    description: str
    policy: str
    tools: list[ToolSpec]
    state_schema: dict[str, Any] | None


def describe(domain: type[Environment]) -> DomainInfo:
    return DomainInfo(
        name=domain.domain or domain.__name__,
        source=source_of(domain),
        description=domain.description or (inspect.getdoc(domain) or "").split("\n")[0],
        policy=domain.policy,
        tools=domain.tool_specs(),
        state_schema=domain.State.model_json_schema() if domain.State is not None else None,
    )


def registered() -> list[DomainInfo]:
    """Every registered domain (bundled, installed plug-ins, the project's plug-ins)."""
    return [describe(domain) for _, domain in DOMAINS.items()]


API_GUIDE = '''\
# The domain API (harness.sdk)

A domain is the world your agent acts in: state plus the tools the agent may call on it.

    from typing import Annotated
    from pydantic import BaseModel, Field
    from harness.sdk import Environment, ToolError, ToolUnavailable, register_domain, tool

    class DeskState(BaseModel):          # optional: validates every task's start state,
        tickets: dict[str, dict]         # and state checks' keys and paths

    @register_domain                     # optional: lets tasks say `domain: desk`
    class Desk(Environment):
        domain = "desk"
        description = "An IT help desk."  # given to the simulated user and the judge
        policy = "Close only tickets the user owns."   # given to the judge, and to the agent
        State = DeskState                # where its prompt says {{domain.policy}}

        @tool                            # a parameter's description: Annotated with a Field,
        def close_ticket(                # or the docstring's Args: section
            self,
            ticket_id: Annotated[str, Field(description="The ticket's id, e.g. T-7.")],
            note: str = "",
        ) -> dict:
            """Close a ticket.

            Args:
                note: Why it was closed, in the user's words.
            """                          # the description the agent sees: "Close a ticket."
            if self.state.get("outage"):         # the back end failed: an error, not the agent's
                raise ToolUnavailable("ticket service refused the connection")
            if ticket_id not in self.state["tickets"]:
                raise ToolError(f"no ticket {{ticket_id}}")   # the agent sees the refusal
            self.state["tickets"][ticket_id]["open"] = False
            return {{"closed": ticket_id}}                   # JSON result

A task names its domain by a registered name, by `package.module:Desk`, or by
`path/to/desk.py:Desk` (relative to the task file). A domain registers through
`@register_domain` in a module listed under `plugins:` in harness.yaml, or through a
`harness.domains` entry point of an installed package (`desk = "my_pkg.desk:Desk"`).
`harness.sdk` gathers every name a plug-in uses (they stay importable from `harness.domains`).

## Environment
{environment}

## @tool
{tool}

## ToolError
{tool_error}

## ToolUnavailable
{tool_unavailable}

## ToolTimeout
{tool_timeout}

## register_domain
{register}

## TraceReplay (only for tasks made from production traces)
{trace_replay}

## Your agent (runner: python)
`entry: agent.py:respond` names `respond(conversation, tools)`, called once per user turn, sync or
async: `conversation` is a list of `{{"role": "user" | "assistant", "content": str}}`;
`tools.call(name, **arguments)` (`await tools.acall(...)` when async) runs a tool of the domain
and returns its JSON result or raises `ToolError`; `tools.specs` are the tools in OpenAI form;
`tools.variant` is the agent variant (its prompt, skills, parameters); `tools.system_prompt` its
prompt and skills as the llm runner sends them (`{{domain.policy}}`, `{{domain.description}}`
filled in); `tools.policy` the domain's policy ("" if none). Return the reply as a
string, or a dict whose `content` is a string: anything else (None, a number, a dict without
it) is the agent's failure (a fail), as is an exception your code raises (an agent crash). A
tool whose infrastructure failed raises `ToolUnavailable` (or `ToolTimeout`) instead: the turn
then ends as an `error` of the tool side, never counted against your agent, whether your code
lets the exception through, raises another or replies anyway; further tool calls raise it
again without running.
'''


def api_guide() -> str:
    """The guide printed by `harness schema domain`, from the API's own docstrings."""
    return API_GUIDE.format(
        environment=inspect.getdoc(Environment),
        tool=inspect.getdoc(tool),
        tool_error=inspect.getdoc(ToolError),
        tool_unavailable=inspect.getdoc(ToolUnavailable),
        tool_timeout=inspect.getdoc(ToolTimeout),
        register=inspect.getdoc(register_domain),
        trace_replay=inspect.getdoc(TraceReplay),
    )

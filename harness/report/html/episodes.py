"""One episode as the HTML pages show it: the conversation grouped into chat turns (each tool
call beside its result), what it changed in the environment, and how it was graded."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from harness.grading.checks import uses_judge
from harness.grading.result import CheckResult, Verdict
from harness.report.html.diff import StateChange, state_changes
from harness.store import StoredTask
from harness.transcript import Message, Transcript, Usage


class ToolStep(BaseModel):
    """A tool call the agent made and what the tool answered."""

    name: str = Field(description="The tool called.")
    arguments: str = Field(description="The arguments as indented JSON.")
    result: str | None = Field(default=None, description="The tool's answer; None if none came.")
    is_error: bool = Field(default=False, description="The tool refused or raised.")


class Turn(BaseModel):
    """One chat bubble: a message's text and, for the agent, the tools it called."""

    role: str = Field(description="user, assistant, system, or tool (a result with no call).")
    text: str = Field(default="", description="What was said.")
    tools: list[ToolStep] = Field(default_factory=list, description="Tool calls, in order.")


class EpisodeView(BaseModel):
    """Everything a page shows of one episode."""

    key: str = Field(description="Unique within a page: the id of its anchor and fragment.")
    run_id: str = Field(description="The run in the results store.")
    variant: str = Field(description="Agent variant name.")
    task_id: str = Field(description="The task played.")
    title: str = Field(default="", description="The task's title, when its file was read.")
    level: int | None = Field(default=None, description="The task's level, when known.")
    tags: list[str] = Field(default_factory=list, description="The task's tags, when known.")
    trial: int = Field(description="Trial index.")
    seed: int = Field(description="Seed of the episode's model calls.")
    persona: str = Field(description="The simulated user's persona.")
    outcome: str = Field(description="pass, fail, error, or ungraded.")
    score: float | None = Field(default=None, description="The verdict's weighted score.")
    reason: str = Field(default="", description="The verdict's summary.")
    end_reason: str = Field(description="Why the episode ended.")
    end_detail: str = Field(default="", description="More on the end.")
    error: str = Field(default="", description="`[side] message` when the episode errored.")
    turns: int = Field(description="User turns the agent answered.")
    started_at: str = Field(default="", description="ISO-8601 start time, when recorded.")
    duration_s: float = Field(description="Wall time in seconds.")
    cost_usd: float = Field(
        description="What the episode cost in US dollars: agent, simulated user and judge."
    )
    tokens: int = Field(description="Agent input plus output tokens.")
    chat: list[Turn] = Field(description="The conversation as chat turns.")
    changes: list[StateChange] | None = Field(
        default=None, description="Start -> final state changes; None when the start is unknown."
    )
    final_state: str = Field(
        default="", description="The final state as JSON, shown only when the start is unknown."
    )
    checks: list[CheckResult] = Field(default_factory=list, description="Each check's result.")

    @property
    def judged(self) -> list[CheckResult]:
        """The checks a judge decided (their kind uses one): their reason is the judge's
        explanation."""
        return [check for check in self.checks if uses_judge(check.kind)]

    def matches_text(self, needle: str) -> bool:
        """Whether any message, tool argument or result contains `needle` (lowercase)."""
        for turn in self.chat:
            if needle in turn.text.lower():
                return True
            for step in turn.tools:
                if needle in step.arguments.lower() or needle in (step.result or "").lower():
                    return True
        return False


def _arguments(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, indent=1, sort_keys=True, ensure_ascii=False)


def chat_turns(messages: list[Message]) -> list[Turn]:
    """Messages as chat turns: a tool result is placed under the call it answers."""
    turns: list[Turn] = []
    open_calls: dict[str, ToolStep] = {}
    for message in messages:
        if message.role == "tool":
            step = open_calls.pop(message.tool_call_id or "", None)
            if step is None:
                turns.append(Turn(role="tool", text=f"{message.name or 'tool'}: {message.content}"))
            else:
                step.result, step.is_error = message.content, message.is_error
            continue
        steps = [
            ToolStep(name=c.name, arguments=_arguments(c.arguments)) for c in message.tool_calls
        ]
        open_calls.update(zip((call.id for call in message.tool_calls), steps, strict=True))
        previous = turns[-1] if turns else None
        if previous and previous.role == message.role == "assistant" and not previous.text:
            # a tool-calling step and the reply that follows are one bubble of the agent
            previous.text, previous.tools = message.content, [*previous.tools, *steps]
            continue
        turns.append(Turn(role=message.role, text=message.content, tools=steps))
    return turns


def episode_view(
    key: str, run_id: str, transcript: Transcript, verdict: Verdict | None, case: StoredTask | None
) -> EpisodeView:
    """The page's view of one stored episode; `case` (the task as the run played it, when the
    store or its file says) gives the title, level, tags and start state."""
    t = transcript
    judged = verdict.judge_usage() if verdict else Usage()
    return EpisodeView(
        key=key,
        run_id=run_id,
        variant=t.variant,
        task_id=t.task_id,
        title=case.title if case else "",
        level=case.task.level if case else None,
        tags=list(case.task.tags) if case else [],
        trial=t.trial,
        seed=t.seed,
        persona=t.persona,
        outcome=verdict.outcome if verdict else "ungraded",
        score=verdict.score if verdict else None,
        reason=verdict.reason if verdict else "",
        end_reason=t.end_reason.value,
        end_detail=t.end_detail,
        error=f"[{t.error.side.value}] {t.error.message}" if t.error else "",
        turns=t.turns,
        started_at=t.started_at,
        duration_s=t.duration_s,
        cost_usd=t.usage.cost_usd + t.user_usage.cost_usd + judged.cost_usd,
        tokens=t.usage.input_tokens + t.usage.output_tokens,
        chat=chat_turns(t.messages),
        changes=state_changes(case.state, t.final_state) if case is not None else None,
        final_state="" if case is not None else json.dumps(t.final_state, indent=1),
        checks=list(verdict.checks) if verdict else [],
    )

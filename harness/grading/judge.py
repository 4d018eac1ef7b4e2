"""LLM judges: a criterion judged on one conversation, or two conversations compared.

A judgement is JSON the model must produce; a reply that cannot be parsed is asked again (with a
different seed, so the cache does not return the same reply) and, after the retries, is an
`error` outcome of the judge, never a fail. Every attempt that got a reply is accounted: `ask`
adds its usage (the unparseable replies' included) to the caller's `Usage`, so that a run's cost
counts what its judges spent.
"""

from __future__ import annotations

import json
from typing import Literal, TypeVar

from pydantic import BaseModel, ValidationError

from harness.domains import Environment, UnknownDomain, resolve_domain
from harness.jsontext import json_values
from harness.models import ChatModel, CompletionParams, ModelError
from harness.specs.task import Task
from harness.transcript import Message, Transcript, Usage

J = TypeVar("J", bound=BaseModel)

JUDGE_ROLE = (
    "You are a strict, impartial evaluator of conversations between a user and an AI agent."
)
JUDGE_RULES = (
    "Judge only what the conversation shows; tool calls and their results are part of it. "
    "Answer with one JSON object and nothing else."
)
JUDGE_SYSTEM = f"{JUDGE_ROLE} {JUDGE_RULES}"


def task_domain(task: Task) -> type[Environment] | None:
    """The environment class of the task's domain, for its description and policy; None when it
    cannot be resolved where grading runs (the judge is then told neither)."""
    try:
        return resolve_domain(task.domain)
    except UnknownDomain:
        return None


def judge_system(domain: type[Environment] | None = None) -> str:
    """The judge's instructions, with the domain's description and policy when it has them."""
    if domain is None or not (domain.description or domain.policy):
        return JUDGE_SYSTEM
    parts = [JUDGE_ROLE]
    if domain.description:
        parts.append(f"The setting: {domain.description}")
    if domain.policy:
        parts.append(f"The policy the agent must follow:\n{domain.policy}")
    return "\n\n".join([*parts, JUDGE_RULES])


class Judgement(BaseModel):
    """A judge's decision on one criterion."""

    reasoning: str
    passed: bool


class Preference(BaseModel):
    """A judge's choice between two conversations."""

    reasoning: str
    better: Literal["1", "2", "tie"]


def render(transcript: Transcript) -> str:
    """The conversation as plain text, tool calls and results included."""
    lines = []
    for message in transcript.messages:
        if message.role == "tool":
            lines.append(f"[tool result {message.name}] {message.content}")
            continue
        if message.content:
            lines.append(f"{message.role.upper()}: {message.content}")
        lines += [f"[tool call {c.name}] {json.dumps(c.arguments)}" for c in message.tool_calls]
    return "\n".join(lines)


def criterion_prompt(
    criterion: str, rubric: str, transcript: Transcript, domain: type[Environment] | None = None
) -> list[Message]:
    rules = f"\nRubric: {rubric}" if rubric else ""
    question = (
        f"Conversation:\n{render(transcript)}\n\nCriterion: {criterion}{rules}\n\n"
        'Reply with JSON: {"reasoning": "<one or two sentences>", "passed": true or false}'
    )
    system = judge_system(domain)
    return [Message(role="system", content=system), Message(role="user", content=question)]


def pairwise_prompt(
    goal: str, first: Transcript, second: Transcript, domain: type[Environment] | None = None
) -> list[Message]:
    question = (
        f"The user's goal: {goal}\n\nConversation 1:\n{render(first)}\n\n"
        f"Conversation 2:\n{render(second)}\n\nWhich agent handled the user's request "
        "better (correct actions, policy followed, clear and honest replies)? Reply with JSON: "
        '{"reasoning": "<one or two sentences>", "better": "1", "2" or "tie"}'
    )
    system = judge_system(domain)
    return [Message(role="system", content=system), Message(role="user", content=question)]


def parse(text: str, model: type[J]) -> J | None:
    """The first JSON object in the text (or nested in one) that validates as `model`, or None."""
    for _, _, value in json_values(text, "{", nested=True):
        try:
            return model.model_validate(value)
        except ValidationError:
            continue
    return None


class JudgeError(Exception):
    """The judge gave no usable judgement."""


async def ask(
    model: ChatModel,
    prompt: list[Message],
    schema: type[J],
    retries: int,
    trial: int = 0,
    usage: Usage | None = None,
) -> J:
    """Ask the judge until it answers in `schema`, at most 1 + `retries` times. The usage of
    every reply (retries and unparseable replies included) is added to `usage`, also when no
    valid judgement came back; a call that failed without a reply adds nothing."""
    reply = ""
    for attempt in range(retries + 1):
        params = CompletionParams(temperature=0.0, max_tokens=400, seed=attempt, trial=trial)
        try:
            completion = await model.complete(prompt, [], params)
        except ModelError as exc:
            raise JudgeError(str(exc)) from None
        if usage is not None:
            usage.add(completion.usage)
        reply = completion.message.content
        if (parsed := parse(reply, schema)) is not None:
            return parsed
    shown = reply.replace("\n", " ")[:120]
    raise JudgeError(f"no valid judgement after {retries + 1} attempts; last reply: {shown!r}")

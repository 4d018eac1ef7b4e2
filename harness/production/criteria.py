"""The judge criteria of failure tasks, rewritten by a model when one is configured
(`harness traces to-tasks --criteria-model M`): the model reads the production conversation, what
went wrong and the template criterion, and states what the correct behaviour is. Without a model,
or when the model fails or answers nothing, the deterministic template stays (and a failure is
reported, never raised)."""

from __future__ import annotations

import asyncio
from typing import Any

from harness.models import CompletionParams, ModelError, ModelRuntime
from harness.production.reconstruct import Conversation
from harness.secrets import redact
from harness.specs.agent import ModelRef
from harness.transcript import Message

WRITER = (
    "You write evaluation criteria for an AI agent. Given a production conversation that went "
    "wrong and a draft criterion, write the criterion a judge will apply to a new conversation "
    "of the same request: one to three sentences stating what the agent must do or avoid, "
    "specific to this request, without mentioning production. Reply with the criterion only."
)


def _render(conversation: Conversation) -> str:
    lines = []
    for message in conversation.transcript.messages:
        for call in message.tool_calls:
            lines.append(f"agent calls {call.name}({call.arguments})")
        if message.content:
            lines.append(f"{message.role}: {message.content[:500]}")
    return "\n".join(lines[-40:])


async def _rewrite(
    model: Any, conversation: Conversation, reasons: list[str], check: dict[str, Any]
) -> str:
    question = redact(  # production's keys and card numbers are no model's business
        f"Conversation:\n{_render(conversation)}\n\nWhat went wrong: {'; '.join(reasons)}\n\n"
        f"Draft criterion: {check['criterion']}"
    )
    prompt = [Message(role="system", content=WRITER), Message(role="user", content=question)]
    completion = await model.complete(prompt, [], CompletionParams(temperature=0.0, max_tokens=300))
    return " ".join(completion.message.content.split())


def rewrite_criteria(
    tasks: list[tuple[dict[str, Any], Conversation]], model_ref: ModelRef
) -> list[str]:
    """Rewrite the `llm_judge` criteria of the failure tasks in place; what failed, as notes."""

    async def run() -> list[str]:
        runtime = ModelRuntime()
        notes: list[str] = []
        try:
            model = runtime.model(model_ref, role="criteria writer")
            for data, conversation in tasks:
                reasons = data["source"]["reasons"]
                for check in (c for c in data["checks"] if c["kind"] == "llm_judge"):
                    try:
                        written = await _rewrite(model, conversation, reasons, check)
                    except ModelError as exc:
                        notes.append(f"{data['id']}: criteria model failed ({exc}); template kept")
                        continue
                    if written:
                        check["criterion"] = written
        except ModelError as exc:
            notes.append(f"criteria model: {exc}; templates kept")
        finally:
            await runtime.aclose()
        return notes

    return asyncio.run(run())

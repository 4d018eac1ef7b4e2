"""Agents under test. `LLMAgent` is the built-in tool-calling loop driven by a variant."""

from __future__ import annotations

from harness.domains import Environment
from harness.models import ChatModel, CompletionParams
from harness.specs.agent import AgentVariant
from harness.transcript import Message, Usage


class LLMAgent:
    """Answers a user turn: calls the model, runs the tools it asks for, until it replies in text
    or uses up its tool steps. Messages are appended to the shared conversation as they happen,
    so a failure mid-turn leaves a faithful partial transcript."""

    def __init__(self, variant: AgentVariant, model: ChatModel):
        self.variant = variant
        self.model = model
        self.system_prompt = variant.full_system_prompt()

    async def respond(
        self, messages: list[Message], env: Environment, seed: int = 0, trial: int = 0
    ) -> Usage:
        """Append the agent's messages for this turn to `messages`; return the usage."""
        usage = Usage()
        tools = env.tool_specs(self.variant.tools)
        params = CompletionParams(
            temperature=self.variant.parameters.temperature,
            max_tokens=self.variant.parameters.max_tokens,
            seed=seed,
            trial=trial,
        )
        for _ in range(self.variant.parameters.max_tool_steps):
            prompt = [Message(role="system", content=self.system_prompt), *messages]
            completion = await self.model.complete(prompt, tools, params)
            usage.add(completion.usage)
            reply = completion.message
            messages.append(reply)
            if not reply.tool_calls:
                break
            for call in reply.tool_calls:
                allowed = call.name in self.variant.tools
                outcome = env.call(call.name, call.arguments) if allowed else None
                messages.append(
                    Message(
                        role="tool",
                        tool_call_id=call.id,
                        name=call.name,
                        content=outcome.content
                        if outcome
                        else f"Error: unknown tool '{call.name}'",
                        is_error=outcome.is_error if outcome else True,
                    )
                )
            if env.done:
                break
        return usage

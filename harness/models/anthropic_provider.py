"""`anthropic/<model>`: the official `anthropic` async client."""

from __future__ import annotations

from typing import Any

from harness.models.base import Completion, CompletionParams, ProviderPolicy, register_provider
from harness.models.sdk import SdkModel, sdk_errors
from harness.models.wire_anthropic import (
    message_from_response,
    to_wire,
    to_wire_tools,
    usage_from_response,
)
from harness.transcript import Message, ToolSpec


@register_provider("anthropic")
class AnthropicModel(SdkModel):
    """One Claude model behind the messages API (or a compatible server at `base_url`)."""

    policy = ProviderPolicy(concurrency=16)
    sdk_module = "anthropic"
    client_class = "AsyncAnthropic"
    key_env = "ANTHROPIC_API_KEY"

    async def complete(
        self, messages: list[Message], tools: list[ToolSpec], params: CompletionParams
    ) -> Completion:
        system, wire = to_wire(messages)
        # The messages API of anthropic>=2 takes no sampling temperature: it is not sent.
        request: dict[str, Any] = {
            "model": self.model,
            "messages": wire,
            "max_tokens": params.max_tokens,
        }
        if system:
            request["system"] = system
        if tools:
            request["tools"] = to_wire_tools(tools)
        with sdk_errors(self.name, self._sdk):
            response = await self._clients.get().messages.create(**request)
        return Completion(
            message=message_from_response(response.content),
            usage=usage_from_response(response.usage),
            model=self.name,
        )

"""`openai/<model>`: the official `openai` async client, for OpenAI and any compatible server
(vLLM, Ollama, llama.cpp server, a user's own agent service) through `base_url`."""

from __future__ import annotations

from typing import Any

from harness.models.base import (
    Completion,
    CompletionParams,
    ModelError,
    ProviderPolicy,
    register_provider,
)
from harness.models.sdk import SdkModel, sdk_errors
from harness.models.wire_openai import (
    message_from_response,
    to_wire_messages,
    to_wire_tools,
    usage_from_response,
)
from harness.transcript import Message, ToolSpec


@register_provider("openai")
class OpenAIModel(SdkModel):
    """One model behind an OpenAI-compatible chat-completions endpoint."""

    policy = ProviderPolicy(concurrency=32)
    sdk_module = "openai"
    key_env = "OPENAI_API_KEY"

    def make_client(self, sdk: Any, key: str, base_url: str | None, timeout_s: float) -> Any:
        return sdk.AsyncOpenAI(api_key=key, base_url=base_url, max_retries=0, timeout=timeout_s)

    async def complete(
        self, messages: list[Message], tools: list[ToolSpec], params: CompletionParams
    ) -> Completion:
        request: dict[str, Any] = {
            "model": self.model,
            "messages": to_wire_messages(messages),
            "temperature": params.temperature,
            "max_tokens": params.max_tokens,
            "seed": params.seed,
        }
        if tools:
            request["tools"] = to_wire_tools(tools)
        with sdk_errors(self.name, self._sdk):
            response = await self._clients.get().chat.completions.create(**request)
        if not response.choices:
            raise ModelError(f"{self.name}: response without choices", retryable=True)
        return Completion(
            message=message_from_response(response.choices[0].message),
            usage=usage_from_response(response.usage),
            model=self.name,
        )

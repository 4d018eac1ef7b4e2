"""`openai/<model>`: the official `openai` async client, for OpenAI and any compatible server
(vLLM, Ollama, llama.cpp server, a user's own agent service) through `base_url`.

The request body is built here in wire form (`wire_openai`), so it is posted with the client's
`post`, the SDK's own route for a ready body (same auth, headers, timeout and response model),
not through `chat.completions.create`: `create` walks its parameter types over every message
and tool of every call to transform values that, in chat-completion parameters, need no
transform. That walk was 40 to 45% of the client's CPU per call (`bench/end_to_end.py`); the
bytes sent are the same (`tests/models/test_models.py`)."""

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
    client_class = "AsyncOpenAI"
    key_env = "OPENAI_API_KEY"

    async def complete(
        self, messages: list[Message], tools: list[ToolSpec], params: CompletionParams
    ) -> Completion:
        request: dict[str, Any] = {  # keys placed as `create` places them: the same bytes
            "model": self.model,
            "messages": to_wire_messages(messages),
            "max_tokens": params.max_tokens,
            "seed": params.seed,
            "temperature": params.temperature,
        }
        if tools:
            request["tools"] = to_wire_tools(tools)
        with sdk_errors(self.name, self._sdk):
            response = await self._clients.get().post(
                "/chat/completions", body=request, cast_to=self._sdk.types.chat.ChatCompletion
            )
        if not response.choices:
            raise ModelError(f"{self.name}: response without choices", retryable=True)
        return Completion(
            message=message_from_response(response.choices[0].message),
            usage=usage_from_response(response.usage),
            model=self.name,
        )

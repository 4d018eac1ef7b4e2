"""`openai/<model>`: the official `openai` async client, for OpenAI and any compatible server
(vLLM, Ollama, llama.cpp server, a user's own agent service) through `base_url`."""

from __future__ import annotations

import os
from typing import Any

from harness.models.base import Completion, CompletionParams, ModelError, register_provider
from harness.models.errors import ClientPerLoop, from_status
from harness.models.wire_openai import (
    message_from_response,
    to_wire_messages,
    to_wire_tools,
    usage_from_response,
)
from harness.specs.agent import ModelRef
from harness.transcript import Message, ToolSpec


class OpenAIModel:
    """One model behind an OpenAI-compatible chat-completions endpoint."""

    def __init__(self, ref: ModelRef, timeout_s: float):
        import openai

        self.name = ref.id
        self.model = ref.id.split("/", 1)[1]
        key_env = ref.api_key_env or "OPENAI_API_KEY"
        key = os.environ.get(key_env)
        if key is None and ref.base_url is None:
            raise ModelError(f"{ref.id}: set {key_env} (or give base_url for a local server)")
        self._openai = openai
        # The harness retries and times out calls itself; the client must not retry as well.
        self._clients = ClientPerLoop(
            lambda: openai.AsyncOpenAI(
                api_key=key or "not-needed",
                base_url=ref.base_url,
                max_retries=0,
                timeout=timeout_s,
            )
        )

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
        try:
            response = await self._clients.get().chat.completions.create(**request)
        except self._openai.APIStatusError as exc:
            raise from_status(
                self.name, exc.status_code, exc.response.headers, exc.message
            ) from None
        except self._openai.APITimeoutError:
            raise ModelError(f"{self.name}: timed out", retryable=True) from None
        except self._openai.APIConnectionError as exc:
            raise ModelError(f"{self.name}: connection failed: {exc}", retryable=True) from None
        except (self._openai.APIResponseValidationError, ValueError) as exc:
            raise ModelError(f"{self.name}: malformed response: {exc}", retryable=True) from None
        if not response.choices:
            raise ModelError(f"{self.name}: response without choices", retryable=True)
        return Completion(
            message=message_from_response(response.choices[0].message),
            usage=usage_from_response(response.usage),
            model=self.name,
        )

    async def aclose(self) -> None:
        await self._clients.aclose()


@register_provider("openai")
def _openai(ref: ModelRef, options: dict[str, Any]) -> OpenAIModel:
    return OpenAIModel(ref, options.get("timeout_s", 60.0))

"""`anthropic/<model>`: the official `anthropic` async client."""

from __future__ import annotations

import os
from typing import Any

from harness.models.base import Completion, CompletionParams, ModelError, register_provider
from harness.models.errors import ClientPerLoop, from_status
from harness.models.wire_anthropic import (
    message_from_response,
    to_wire,
    to_wire_tools,
    usage_from_response,
)
from harness.specs.agent import ModelRef
from harness.transcript import Message, ToolSpec


class AnthropicModel:
    """One Claude model behind the messages API (or a compatible server at `base_url`)."""

    def __init__(self, ref: ModelRef, timeout_s: float):
        import anthropic

        self.name = ref.id
        self.model = ref.id.split("/", 1)[1]
        key_env = ref.api_key_env or "ANTHROPIC_API_KEY"
        key = os.environ.get(key_env)
        if key is None and ref.base_url is None:
            raise ModelError(f"{ref.id}: set {key_env} (or give base_url for a local server)")
        self._anthropic = anthropic
        self._clients = ClientPerLoop(
            lambda: anthropic.AsyncAnthropic(
                api_key=key or "not-needed",
                base_url=ref.base_url,
                max_retries=0,
                timeout=timeout_s,
            )
        )

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
        errors = self._anthropic
        try:
            response = await self._clients.get().messages.create(**request)
        except errors.APIStatusError as exc:
            raise from_status(
                self.name, exc.status_code, exc.response.headers, exc.message
            ) from None
        except errors.APITimeoutError:
            raise ModelError(f"{self.name}: timed out", retryable=True) from None
        except errors.APIConnectionError as exc:
            raise ModelError(f"{self.name}: connection failed: {exc}", retryable=True) from None
        except (errors.APIResponseValidationError, ValueError) as exc:
            raise ModelError(f"{self.name}: malformed response: {exc}", retryable=True) from None
        return Completion(
            message=message_from_response(response.content),
            usage=usage_from_response(response.usage),
            model=self.name,
        )

    async def aclose(self) -> None:
        await self._clients.aclose()


@register_provider("anthropic")
def _anthropic(ref: ModelRef, options: dict[str, Any]) -> AnthropicModel:
    return AnthropicModel(ref, options.get("timeout_s", 60.0))

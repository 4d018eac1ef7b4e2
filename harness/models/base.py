"""The one protocol every model call goes through, and the registry of providers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from harness.registry import Registry
from harness.specs.agent import ModelRef
from harness.transcript import Message, ToolSpec, Usage


class CompletionParams(BaseModel):
    """Generation settings of one call. `seed` carries the trial so repeated trials differ."""

    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(default=0.0, description="Sampling temperature.")
    max_tokens: int = Field(default=1024, description="Most tokens in the reply.")
    seed: int = Field(default=0, description="Seed; distinct per trial.")


class Completion(BaseModel):
    """A model's reply and what it cost."""

    model_config = ConfigDict(extra="forbid")

    message: Message = Field(description="The assistant message, possibly with tool calls.")
    usage: Usage = Field(default_factory=Usage, description="Tokens, cost and latency.")
    model: str = Field(description="The model that answered.")


class ModelError(Exception):
    """A model call that failed; `retryable` errors are worth another attempt."""

    def __init__(self, message: str, retryable: bool = False):
        super().__init__(message)
        self.retryable = retryable


@runtime_checkable
class ChatModel(Protocol):
    """Anything that turns a conversation (and offered tools) into the next assistant message."""

    name: str

    async def complete(
        self, messages: list[Message], tools: list[ToolSpec], params: CompletionParams
    ) -> Completion: ...


ProviderFactory = Callable[[ModelRef, dict[str, Any]], ChatModel]
PROVIDERS: Registry[ProviderFactory] = Registry("model provider", ("harness.models.scripted",))
register_provider = PROVIDERS.register  # a factory for model ids `prefix` or `prefix/<model>`


def create_model(
    ref: ModelRef | str | dict[str, Any], variables: dict[str, Any] | None = None
) -> ChatModel:
    """Build the model a reference names. `variables` feed the templates of scripted models."""
    ref = ref if isinstance(ref, ModelRef) else ModelRef.model_validate(ref)
    prefix = ref.id.split("/", 1)[0]
    factory = PROVIDERS.get(prefix)
    if factory is None:
        known = ", ".join(PROVIDERS.names())
        raise ModelError(f"unknown model provider '{prefix}' in '{ref.id}'; known: {known}")
    return factory(ref, variables or {})

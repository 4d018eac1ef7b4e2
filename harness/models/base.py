"""The one protocol every model call goes through, and the registry of providers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from harness.registry import Registry
from harness.secrets import redact
from harness.specs.agent import ModelRef
from harness.transcript import Message, ToolSpec, Usage


class CompletionParams(BaseModel):
    """Generation settings of one call. `trial` keeps repeated trials apart in the cache."""

    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(default=0.0, description="Sampling temperature.")
    max_tokens: int = Field(default=1024, description="Most tokens in the reply.")
    seed: int = Field(default=0, description="Sampling seed, where the provider takes one.")
    trial: int = Field(default=0, description="Trial index of the episode making the call.")


class Completion(BaseModel):
    """A model's reply and what it cost."""

    model_config = ConfigDict(extra="forbid")

    message: Message = Field(description="The assistant message, possibly with tool calls.")
    usage: Usage = Field(default_factory=Usage, description="Tokens, cost and latency.")
    model: str = Field(description="The model that answered.")


class ModelError(Exception):
    """A model call that failed. `retryable` errors (429, 5xx, timeouts, dropped connections,
    malformed replies) are worth another attempt, after `retry_after` seconds when the server
    said so. `status` is the HTTP status the endpoint answered, None when it gave none (no
    connection, a timeout, a malformed reply, a model without HTTP). The message is redacted:
    it never carries an API key."""

    def __init__(
        self,
        message: str,
        retryable: bool = False,
        retry_after: float | None = None,
        status: int | None = None,
    ):
        super().__init__(redact(message))
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status


@runtime_checkable
class ChatModel(Protocol):
    """Anything that turns a conversation (and offered tools) into the next assistant message."""

    name: str

    async def complete(
        self, messages: list[Message], tools: list[ToolSpec], params: CompletionParams
    ) -> Completion: ...


@dataclass(frozen=True)
class ProviderPolicy:
    """How the runtime treats one provider's calls. Each provider class declares its own as
    `policy`; a provider that declares none gets these defaults."""

    concurrency: int = 16
    """Calls in flight per endpoint, unless the model reference sets `max_concurrency`."""
    cache: bool = True
    """Whether replies are worth caching (not for deterministic, free providers)."""
    free: bool = False
    """Whether calls cost nothing (then a model missing from the price table is not unpriced)."""
    retry: bool = True
    """Whether a retryable failure is tried again (never for deterministic providers)."""
    in_process: bool = False
    """Whether the model runs inside the calling process (embedded, scripted): its limit guards
    that process's copy, so it stays per process when episodes run on several workers."""


@runtime_checkable
class ProviderClass(Protocol):
    """A provider class that makes its models with a `from_ref(ref, options)` class method."""

    def from_ref(self, ref: ModelRef, options: dict[str, Any]) -> ChatModel: ...


ProviderFactory = Callable[[ModelRef, dict[str, Any]], ChatModel] | ProviderClass
PROVIDERS: Registry[ProviderFactory] = Registry(
    "model provider",
    tuple(
        f"harness.models.{name}"
        for name in ("scripted", "openai_provider", "anthropic_provider", "local")
    ),
    group="harness.providers",
)
# A factory `(ref, options) -> ChatModel` (usually the provider class itself) registered under
# the prefix of model ids `prefix` or `prefix/<model>`; options carry `timeout_s` and, for
# scripted models, template `variables`. Its `policy` attribute is its `ProviderPolicy`.
register_provider = PROVIDERS.register


def provider_name(model_id: str) -> str:
    """The provider part of a model id: `openai` of `openai/gpt-4.1-mini`."""
    return model_id.split("/", 1)[0]


def unknown_provider(model_id: str) -> str | None:
    """What is wrong with a model id whose provider nobody registered (the known ones, and how
    to add one), or None: checked when a file naming the model is loaded, not at its first
    call."""
    name = provider_name(model_id)
    return PROVIDERS.unknown(name) if PROVIDERS.get(name) is None else None


def provider_policy(model_id: str) -> ProviderPolicy:
    """The policy the provider of a model id declares (defaults for an unknown one)."""
    provider = PROVIDERS.get(provider_name(model_id))
    return getattr(provider, "policy", None) or ProviderPolicy()

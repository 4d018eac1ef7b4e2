"""What surrounds every provider: a concurrency limit, retries with backoff, a per-call timeout,
an on-disk response cache, and token and cost accounting.

A run builds one `ModelRuntime`; every model it asks for (agent, user simulator, judge) is the
provider wrapped in a `ManagedModel`, which is itself a `ChatModel`. The runtime keeps one
provider instance per provider reference (so one SDK client and connection pool serve every
episode and check that names it) and one `ManagedModel` per reference and role: the role names
the caller in traces and errors, while each call's usage goes back to the caller that made it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import time
import weakref
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

import yaml
from pydantic import Field, RootModel, TypeAdapter

from harness.defaults import MODEL_RETRIES, MODEL_TIMEOUT_S, RESPONSE_CACHE
from harness.models.base import (
    PROVIDERS,
    ChatModel,
    Completion,
    CompletionParams,
    ModelError,
    ProviderClass,
    provider_name,
    provider_policy,
)
from harness.secrets import redact
from harness.specs.agent import ModelRef
from harness.specs.base import Spec
from harness.specs.located import read_yaml
from harness.specs.validation import validate
from harness.sqlite import connect
from harness.tracing import child_span
from harness.transcript import Message, ToolSpec


@dataclass(frozen=True)
class CallPolicy:
    """How hard to try: attempts, backoff and the per-call timeout."""

    timeout_s: float = MODEL_TIMEOUT_S
    max_retries: int = MODEL_RETRIES
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds before retry `attempt` (0-based): the server's Retry-After when it gave one,
        otherwise exponential backoff with full jitter."""
        if retry_after is not None:
            return min(retry_after, self.backoff_max_s)
        return random.uniform(0, min(self.backoff_max_s, self.backoff_base_s * 2**attempt))


class Price(Spec):
    """The price of one model."""

    input: float = Field(ge=0, description="USD per million input tokens.")
    output: float = Field(ge=0, description="USD per million output tokens.")


class PriceFile(RootModel[dict[str, Price]]):
    """A prices file: model id -> price."""


PRICE_FILE = TypeAdapter(dict[str, Price])


class PriceTable:
    """US dollars per million input and output tokens, by model id. The bundled table can be
    overridden by a YAML file of the same shape."""

    def __init__(self, override: Path | None = None):
        bundled = resources.files("harness.models").joinpath("prices.yaml").read_text()
        self.prices = PRICE_FILE.validate_python(yaml.safe_load(bundled))
        if override is not None:
            data, positions = read_yaml(override)
            self.prices.update(validate(PriceFile, data or {}, positions, override).root)
        self.unpriced: set[str] = set()

    def cost(self, model_id: str, input_tokens: int, output_tokens: int) -> float:
        if provider_policy(model_id).free:
            return 0.0
        price = self.prices.get(model_id)
        if price is None:
            self.unpriced.add(model_id)
            return 0.0
        return (input_tokens * price.input + output_tokens * price.output) / 1_000_000


class ResponseCache:
    """Completions by a hash of the request and trial, in SQLite. Errors are never stored."""

    def __init__(self, path: Path = RESPONSE_CACHE):
        self.path = path
        self.db = connect(path)
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, completion TEXT NOT NULL)"
        )
        self.hits = 0

    @staticmethod
    def key(
        ref: ModelRef, messages: list[Message], tools: list[ToolSpec], params: CompletionParams
    ) -> str:
        request = {
            "model": ref.id,
            "base_url": ref.base_url,
            "messages": [m.model_dump(mode="json") for m in messages],
            "tools": [t.model_dump(mode="json") for t in tools],
            "params": params.model_dump(mode="json"),
        }
        text = json.dumps(request, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def get(self, key: str) -> Completion | None:
        row = self.db.execute("SELECT completion FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        self.hits += 1
        return Completion.model_validate_json(row[0])

    def put(self, key: str, completion: Completion) -> None:
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?)",
                (key, redact(completion.model_dump_json())),
            )

    def close(self) -> None:
        self.db.close()


class ManagedModel:
    """A provider with the harness's limits, retries, cache and accounting around it."""

    def __init__(self, inner: ChatModel, ref: ModelRef, role: str, runtime: ModelRuntime):
        self.inner = inner
        self.ref = ref
        self.role = role
        self.runtime = runtime
        self.name = ref.id
        self.policy = getattr(inner, "policy", None) or provider_policy(ref.id)
        self.limit_key = (provider_name(ref.id), ref.base_url)
        self.limit = ref.max_concurrency or self.policy.concurrency
        self.cache = runtime.cache if self.policy.cache else None

    async def complete(
        self, messages: list[Message], tools: list[ToolSpec], params: CompletionParams
    ) -> Completion:
        # What a reader of the trace needs, kept small: weave pays for every value it records.
        inputs = {
            "model": self.name,
            "role": self.role,
            "messages": len(messages),
            "last": messages[-1].content if messages else "",
        }
        with child_span("harness.model_call", inputs) as span:
            completion = await self._complete(messages, tools, params)
            reply, usage = completion.message, completion.usage
            span.output = {
                "content": reply.content,
                "tool_calls": [
                    {"name": c.name, "arguments": c.arguments} for c in reply.tool_calls
                ],
                "tokens": [usage.input_tokens, usage.output_tokens],
            }
        return completion

    async def _complete(
        self, messages: list[Message], tools: list[ToolSpec], params: CompletionParams
    ) -> Completion:
        key = ResponseCache.key(self.ref, messages, tools, params) if self.cache else ""
        if self.cache and (cached := self.cache.get(key)) is not None:
            cached.usage.cached_calls = cached.usage.calls
            return cached
        policy = self.runtime.policy
        limiter = self.runtime.limiter(self.limit_key, self.limit, self.policy.in_process)
        for attempt in range(policy.max_retries + 1):
            try:
                async with limiter, asyncio.timeout(policy.timeout_s):
                    started = time.perf_counter()
                    completion = await self.inner.complete(messages, tools, params)
                    latency = time.perf_counter() - started
                break
            except (ModelError, TimeoutError) as exc:
                error = (
                    exc
                    if isinstance(exc, ModelError)
                    else ModelError(
                        f"{self.name}: no reply within {policy.timeout_s:g}s", retryable=True
                    )
                )
                if not (error.retryable and self.policy.retry) or attempt == policy.max_retries:
                    tries = f" after {attempt + 1} attempts" if attempt else ""
                    raise ModelError(
                        f"{self.role} model {error}{tries}", status=error.status
                    ) from None
                delay = await self.runtime.retry_delay(
                    self.limit_key,
                    policy.delay(attempt, error.retry_after),
                    self.policy.in_process,
                )
                if delay is None:
                    spent = "the endpoint's retry budget is spent"
                    raise ModelError(
                        f"{self.role} model {error} ({spent})", status=error.status
                    ) from None
                await asyncio.sleep(delay)
        usage = completion.usage
        usage.latency_s = latency
        usage.cost_usd = self.runtime.prices.cost(
            self.name, usage.input_tokens, usage.output_tokens
        )
        if self.name in self.runtime.prices.unpriced:
            usage.unpriced = [self.name]
        if self.cache:
            self.cache.put(key, completion)
        return completion


def provider_reference(ref: ModelRef, variables: dict[str, Any] | None = None) -> str:
    """What one provider instance is made from: the reference (provider and model id, endpoint,
    key variable, script, checksum) and the template variables of a scripted model; not the
    concurrency limit, which only the calls around the provider obey."""
    made_of = ref.model_dump(mode="json", exclude={"max_concurrency"})
    return json.dumps([made_of, variables or {}], sort_keys=True, default=repr)


def make_provider(
    ref: ModelRef, policy: CallPolicy, variables: dict[str, Any] | None = None
) -> ChatModel:
    """A new instance of the provider a reference names."""
    provider = PROVIDERS.get(provider_name(ref.id))
    if provider is None:
        known = ", ".join(PROVIDERS.names())
        raise ModelError(
            f"unknown model provider '{provider_name(ref.id)}' in '{ref.id}'; known: {known}"
        )
    options = {"timeout_s": policy.timeout_s, "variables": variables or {}}
    if isinstance(provider, ProviderClass):  # it has a `from_ref`
        return provider.from_ref(ref, options)
    return provider(ref, options)


class Limiter(Protocol):
    """Holds one of an endpoint's call slots for the length of an `async with` block."""

    async def __aenter__(self) -> Any: ...

    async def __aexit__(self, *exc_info: Any) -> Any: ...


@dataclass
class ModelRuntime:
    """Everything a run's model calls share: cache, prices, retry policy and limiters."""

    cache: ResponseCache | None = None
    prices: PriceTable = field(default_factory=PriceTable)
    policy: CallPolicy = field(default_factory=CallPolicy)
    _limiters: weakref.WeakKeyDictionary[Any, dict[Any, asyncio.Semaphore]] = field(
        default_factory=weakref.WeakKeyDictionary
    )
    # provider reference -> its provider instance; (reference, concurrency, role) -> its model
    _providers: dict[str, ChatModel] = field(default_factory=dict)
    _models: dict[tuple[str, int | None, str], ManagedModel] = field(default_factory=dict)

    def model(
        self,
        ref: ModelRef | str | dict[str, Any],
        role: str,
        variables: dict[str, Any] | None = None,
    ) -> ManagedModel:
        """The model a reference names, for one role (agent, user simulator, judge): the same
        object for the same reference and role, over the one provider instance of the reference
        (whatever the role) for the runtime's life."""
        ref = ref if isinstance(ref, ModelRef) else ModelRef.model_validate(ref)
        key = provider_reference(ref, variables)
        model = self._models.get((key, ref.max_concurrency, role))
        if model is None:
            inner = self._providers.get(key)
            if inner is None:  # a provider that cannot be made is not kept: asked again, it fails
                inner = self._providers[key] = make_provider(ref, self.policy, variables)
            model = self._models[key, ref.max_concurrency, role] = ManagedModel(
                inner, ref, role, self
            )
        return model

    async def aclose(self) -> None:
        """Close the network clients the models opened in this event loop, each provider once
        (they stay usable: a later call opens a new client)."""
        for provider in self._providers.values():
            if hasattr(provider, "aclose"):
                await provider.aclose()

    def limiter(self, key: Any, limit: int, in_process: bool = False) -> Limiter:
        """The semaphore shared by every call to one provider endpoint in this event loop
        (`in_process`: the model runs in this process; a runtime shared by several processes
        keeps such a limit per process)."""
        per_loop = self._limiters.setdefault(asyncio.get_running_loop(), {})
        if key not in per_loop:
            per_loop[key] = asyncio.Semaphore(limit)
        return per_loop[key]

    async def retry_delay(self, key: Any, delay: float, in_process: bool = False) -> float | None:
        """Seconds to wait before retrying a failed call to an endpoint; None when no retry is
        left. Here every call has its own `max_retries`; a runtime shared by several processes
        also keeps one retry budget per endpoint (not for a model in this process)."""
        return delay

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()

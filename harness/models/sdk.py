"""What the providers built on an official SDK (`openai`, `anthropic`) share: the API key, one
client per event loop, the translation of SDK exceptions, and their runtime policy."""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, Self

from harness.defaults import MODEL_TIMEOUT_S
from harness.models.base import ModelError, ProviderPolicy
from harness.models.errors import from_status
from harness.secrets import declare_secret_env
from harness.specs.agent import ModelRef


class ClientPerLoop:
    """An async SDK client per running event loop: pooled connections belong to the loop that
    opened them, so a client must not outlive it (several `asyncio.run` calls in one process)."""

    def __init__(self, make: Callable[[], Any]):
        self._make = make
        self._clients: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

    def get(self) -> Any:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = self._make()
        return client

    async def aclose(self) -> None:
        """Close this loop's client and its connections (call before the loop ends)."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()


def api_key(ref: ModelRef, default_env: str) -> str:
    """The key a model reference names (by environment variable, never by value). A local
    OpenAI-compatible server may need none."""
    env = ref.api_key_env or default_env
    declare_secret_env(env)  # also where the reference was unpickled, not validated (a worker)
    key = os.environ.get(env)
    if key is None and ref.base_url is None:
        raise ModelError(f"{ref.id}: set {env} (or give base_url for a local server)")
    return key or "not-needed"


@contextmanager
def sdk_errors(name: str, sdk: Any) -> Iterator[None]:
    """Translate the exceptions of the official SDKs (openai and anthropic share their shape)
    into `ModelError`s that say whether a retry may help."""
    try:
        yield
    except sdk.APIStatusError as exc:
        raise from_status(name, exc.status_code, exc.response.headers, exc.message) from None
    except sdk.APITimeoutError:
        raise ModelError(f"{name}: timed out", retryable=True) from None
    except sdk.APIConnectionError as exc:
        raise ModelError(f"{name}: connection failed: {exc}", retryable=True) from None
    except (sdk.APIResponseValidationError, ValueError) as exc:
        raise ModelError(f"{name}: malformed response: {exc}", retryable=True) from None


class SdkModel:
    """Base of an SDK-backed provider: a model id `provider/<model>`, its key, and the SDK's
    async client (made by `make_client(sdk, key, ref, timeout_s)`), one per event loop."""

    policy: ClassVar[ProviderPolicy] = ProviderPolicy()
    sdk_module: ClassVar[str]
    key_env: ClassVar[str]

    def __init__(self, ref: ModelRef, timeout_s: float = MODEL_TIMEOUT_S):
        import importlib

        self.name = ref.id
        self.model = ref.id.split("/", 1)[1]
        key = api_key(ref, self.key_env)
        self._sdk = importlib.import_module(self.sdk_module)
        # The harness retries and times out calls itself; the client must not retry as well.
        self._clients = ClientPerLoop(
            lambda: self.make_client(self._sdk, key, ref.base_url, timeout_s)
        )

    @classmethod
    def from_ref(cls, ref: ModelRef, options: dict[str, Any]) -> Self:
        return cls(ref, options.get("timeout_s", MODEL_TIMEOUT_S))

    def make_client(self, sdk: Any, key: str, base_url: str | None, timeout_s: float) -> Any:
        raise NotImplementedError

    async def aclose(self) -> None:
        await self._clients.aclose()

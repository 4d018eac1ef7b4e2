"""What the providers built on an official SDK (`openai`, `anthropic`) share: the API key, one
client per event loop, the translation of SDK exceptions, and their runtime policy."""

from __future__ import annotations

import asyncio
import os
import ssl
import weakref
from collections.abc import AsyncGenerator, Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, ClassVar, Self

from harness.defaults import MODEL_TIMEOUT_S
from harness.models.base import ModelError, ProviderPolicy
from harness.models.errors import from_status
from harness.secrets import declare_secret_env
from harness.specs.agent import ModelRef


class ClientPerLoop:
    """An async SDK client per running event loop: pooled connections belong to the loop that
    opened them, so a client must not outlive it (several `asyncio.run` calls in one process).

    Each client is closed with its loop even when nobody calls `aclose`: a started async
    generator holds it, and `asyncio.run` closes a loop's async generators before the loop
    (`loop.shutdown_asyncgens`), which runs the generator's `finally`. An aiohttp session left
    open would print "Unclosed client session" at exit."""

    def __init__(self, make: Callable[[], Any]):
        self._make = make
        self._clients: weakref.WeakKeyDictionary[Any, tuple[Any, AsyncGenerator[None, None]]] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> Any:
        loop = asyncio.get_running_loop()
        held = self._clients.get(loop)
        if held is None:
            client = self._make()
            closer = _closed_at_shutdown(client)
            with suppress(StopIteration):  # run it to its `yield`: the loop now tracks it
                closer.asend(None).send(None)
            held = self._clients[loop] = (client, closer)
        return held[0]

    async def aclose(self) -> None:
        """Close this loop's client and its connections (call before the loop ends)."""
        held = self._clients.pop(asyncio.get_running_loop(), None)
        if held is not None:
            await held[1].aclose()


async def _closed_at_shutdown(client: Any) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
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
    async client (`client_class`, made by `make_client`), one per event loop."""

    policy: ClassVar[ProviderPolicy] = ProviderPolicy()
    sdk_module: ClassVar[str]
    client_class: ClassVar[str]  # the SDK's async client class, e.g. `AsyncOpenAI`
    key_env: ClassVar[str]

    def __init__(self, ref: ModelRef, timeout_s: float = MODEL_TIMEOUT_S):
        import importlib

        self.name = ref.id
        self.model = ref.id.split("/", 1)[1]
        key = api_key(ref, self.key_env)
        self._sdk = importlib.import_module(self.sdk_module)
        self._clients = ClientPerLoop(
            lambda: self.make_client(self._sdk, key, ref.base_url, timeout_s)
        )

    @classmethod
    def from_ref(cls, ref: ModelRef, options: dict[str, Any]) -> Self:
        return cls(ref, options.get("timeout_s", MODEL_TIMEOUT_S))

    def make_client(self, sdk: Any, key: str, base_url: str | None, timeout_s: float) -> Any:
        """The SDK's async client: no retries of its own (the harness retries and times out
        calls itself), on `http_client`'s transport."""
        return getattr(sdk, self.client_class)(
            api_key=key,
            base_url=base_url,
            max_retries=0,
            timeout=timeout_s,
            http_client=self.http_client(base_url),
        )

    def http_client(self, base_url: str | None) -> Any:
        """The SDK's own HTTP client on its aiohttp transport (`DefaultAioHttpClient`, the SDK's
        `aiohttp` extra): the same requests for about a third less CPU per call than its
        default httpx transport (`bench/end_to_end.py`), CPU that other episodes wait for under
        concurrency. Without aiohttp, the SDK's httpx client with the same defaults.

        An `http://` endpoint (a local server: vLLM, Ollama, llama.cpp) speaks no TLS, so the
        client gets a TLS context that loads no CA certificate instead of the default one,
        whose loading takes a sixth of a second at start-up; without any CA, a TLS connection
        (a redirect to https) fails verification rather than going unverified."""
        options: dict[str, Any] = {}
        if base_url is not None and base_url.startswith("http://"):
            options["verify"] = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        for name in ("DefaultAioHttpClient", "DefaultAsyncHttpxClient"):
            try:
                return getattr(self._sdk, name)(**options)
            except (AttributeError, RuntimeError):  # an older SDK, or no aiohttp installed
                continue
        return None

    async def aclose(self) -> None:
        await self._clients.aclose()

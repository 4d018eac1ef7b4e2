"""What the HTTP providers share: which failures are worth retrying, how long the server asked
us to wait, and one SDK client per event loop."""

from __future__ import annotations

import asyncio
import email.utils
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from harness.models.base import ModelError

RETRYABLE_STATUS = {408, 409, 425, 429}


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """`Retry-After` (seconds or an HTTP date) or `retry-after-ms`, in seconds."""
    if (millis := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def from_status(name: str, status: int, headers: Mapping[str, str], message: str) -> ModelError:
    """A `ModelError` for an HTTP error status: 429, 408 and 5xx are retryable."""
    retryable = status in RETRYABLE_STATUS or status >= 500
    return ModelError(
        f"{name}: HTTP {status}: {message}",
        retryable=retryable,
        retry_after=retry_after_seconds(headers) if retryable else None,
    )


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

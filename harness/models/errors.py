"""Which HTTP failures are worth retrying, and how long the server asked us to wait."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping

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
        status=status,
    )

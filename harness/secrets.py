"""Keep API keys out of everything the harness writes: errors, logs, stores, traces, reports.

Keys are only ever handed to SDK clients. Anything that becomes text the harness keeps passes
through `redact`, which removes the values of secret-looking environment variables, of every
variable a model reads its key from (`api_key_env`, whatever its name), and strings shaped like
common API keys.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from functools import lru_cache

SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.IGNORECASE)
KEY_SHAPES = re.compile(
    r"(sk-ant-[A-Za-z0-9_\-]{8,}|sk-[A-Za-z0-9_\-]{16,}|Bearer\s+[A-Za-z0-9._\-]{8,}"
    r"|(?:api[_-]?key|x-api-key)[\"']?\s*[:=]\s*[\"']?[A-Za-z0-9._\-]{8,})",
    re.IGNORECASE,
)
MASK = "[REDACTED]"
URL_PASSWORD = re.compile(r"(\w://[^:/@?#\s]*:)[^@/?#\s]+@")
QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#\s]+", re.IGNORECASE)
# Every key shape and URL password holds one of these (lowercased): text with none needs no
# regex scan, which on a long transcript costs more than the substring checks.
SHAPE_MARKS = ("sk-", "bearer", "api", "://", "password=")


def mask_url_passwords(text: str) -> str:
    """`text` with the password of every URL in it masked (`user:PASSWORD@host`,
    `?password=`): a database URL may be printed, its password never."""
    return QUERY_PASSWORD.sub(rf"\1{MASK}", URL_PASSWORD.sub(rf"\1{MASK}@", text))


DECLARED: set[str] = set()
"""Variables declared secret whatever their names: every model's `api_key_env`."""


def declare_secret_env(name: str) -> None:
    """Treat the variable `name` as a secret from now on: a key read through a model's
    `api_key_env` is a secret even when the name says nothing (`VLLM_AUTH`)."""
    DECLARED.add(name)


def secret_values(extra_names: tuple[str, ...] = ()) -> list[str]:
    """Values of environment variables that look like secrets or were declared so (longest
    first)."""
    names = tuple(sorted(DECLARED.union(extra_names)))
    return list(_secret_values(tuple(os.environ.items()), names))


@lru_cache(maxsize=8)  # the environment rarely changes; every stored row is redacted
def _secret_values(environ: tuple[tuple[str, str], ...], extra_names: tuple[str, ...]) -> tuple:
    values = {
        value
        for name, value in environ
        if (SECRET_NAME.search(name) or name in extra_names) and len(value) >= 8
    }
    return tuple(sorted(values, key=len, reverse=True))


def redactor() -> Callable[[str], str]:
    """A `redact` that knows the secrets of the environment as it is now (for hot paths)."""
    values = secret_values()

    def redact_known(text: str) -> str:
        for value in values:
            if value in text:
                text = text.replace(value, MASK)
        lowered = text.lower()
        if not any(mark in lowered for mark in SHAPE_MARKS):  # the common case: nothing to mask
            return text
        return KEY_SHAPES.sub(MASK, mask_url_passwords(text))

    return redact_known


def redact(text: str) -> str:
    """Text with every known secret value and key-shaped string masked."""
    return redactor()(text)

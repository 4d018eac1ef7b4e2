"""Keep keys, passwords and personal data out of everything the harness writes: errors, logs,
stores, traces, reports, and whatever it makes from production traces.

The one redaction layer. Keys are only ever handed to SDK clients; anything that becomes text
the harness keeps passes through `redact`, and text taken from production that is shown to
people or models (persona examples, fidelity reports, `traces show`) through `redact_pii`.

`redact` masks what no evaluation ever needs (docs/guide/secrets.md):
- the values of secret-looking environment variables and of every variable a model reads its
  key from (`api_key_env`, whatever its name): `[REDACTED]`;
- keys and tokens found by Yelp's `detect-secrets` plugins (AWS access key ids, GitHub,
  GitLab, Slack, Stripe, OpenAI, PyPI, SendGrid, Square, Azure storage keys, JWTs), and the
  shapes it has no plugin for (OpenAI `sk-proj-` and other `sk-` keys, Anthropic keys,
  `github_pat_`, Google `AIza`, Hugging Face `hf_`, Stripe test keys, AWS secret access keys
  near an AWS word, bearer tokens, private key blocks): `[REDACTED:<kind>]` (`[REDACTED]` for
  an `sk-` key or a bearer token, whose vendor the shape does not say);
- the value of a `password: ...`/`password=...`/"password is ..." pair (and of `secret`,
  `token`, `api_key` pairs): `password: [REDACTED:password]`;
- the password of every URL (`scheme://user:PASSWORD@host`, the password being anything up to
  the last `@` on its line, `#?/@` and spaces included, at most 256 characters: text between a
  URL and an email on the same line may go with it) and of `?password=` parameters;
- payment card numbers (13-19 digits, spaces or dashes allowed, a card network's prefix and a
  valid Luhn check digit, standing alone: not inside a word or a hex digest), the CVV and
  expiry next to one or named as such, and US social security numbers: `[PII:card]`,
  `[PII:cvv]`, `[PII:card-expiry]`, `[PII:ssn]`.

`redact_pii` also masks contact details: emails (`[PII:email]`) and phone numbers
(`[PII:phone]`). A task made from production keeps them: they are the facts the user gave and
the agent must act on (the scenario's `known_info`, a tool's arguments, a check's value, a
domain's state keyed on them), so a task without them would test another conversation.

Masked text stays readable for people and judges: the placeholder says what was there. Every
detector has literal marks (`ghp_`, `://`, a digit run...) looked up before its regex runs, so
text with nothing to mask costs a few substring checks; `detect-secrets` is imported the first
time a text holds one of its plugins' marks.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from harness.secrets.keys import mask_secrets
from harness.secrets.masks import MASK
from harness.secrets.personal import mask_contacts, mask_payment_and_ids
from harness.secrets.urls import mask_url_passwords, url_passwords

__all__ = [  # the layer, and the URL passwords a database URL's printer masks on its own
    "DECLARED",
    "MASK",
    "declare_secret_env",
    "mask_url_passwords",
    "memoized",
    "redact",
    "redact_data",
    "redact_pii",
    "redactor",
    "secret_values",
    "url_passwords",
]

SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.IGNORECASE)

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
    return list(_secret_values(_environment(), names))


def _environment() -> tuple[tuple[Any, Any], ...]:
    """The environment as it is now, as a cache key. CPython keeps it encoded in
    `os.environ._data`: read from there it costs a twentieth of decoding every item, and every
    stored row and span is redacted."""
    data = getattr(os.environ, "_data", None)
    return tuple(data.items()) if isinstance(data, dict) else tuple(os.environ.items())


@lru_cache(maxsize=8)  # the environment rarely changes
def _secret_values(environ: tuple[tuple[Any, Any], ...], extra_names: tuple[str, ...]) -> tuple:
    decoded = ((_text(name), _text(value)) for name, value in environ)
    values = {
        value
        for name, value in decoded
        if (SECRET_NAME.search(name) or name in extra_names) and len(value) >= 8
    }
    return tuple(sorted(values, key=len, reverse=True))


def _text(value: str | bytes) -> str:
    """An environment name or value as `os.environ` gives it (decoded as it decodes it)."""
    return os.fsdecode(value) if isinstance(value, bytes) else value


# Every shape holds one of these, so one miss says a text has nothing to mask (what most text
# from production is: a search of each costs less than trying the shapes): a run of 12 key
# characters (every key and token is longer), the digits of a card's first two groups, of an
# SSN or of a 9-digit id, or a word (`password`, `token`, `://`, `cvv`, `ssn`...).
LONG_RUN = re.compile(r"[A-Za-z0-9_\-+/]{12,}")
DIGIT_SHAPES = re.compile(r"\d(?:\d{3}[ \-]?\d{4}|\d{2}[ \-]\d{2}[ \-]\d{4}|\d{8})")
WORD_MARKS = (
    *("pass", "pwd", "secret", "token", "key", "://", "bearer"),
    *("cvv", "cvc", "csc", "cid", "security code", "ssn", "social security"),
)
PHONE_HINT = re.compile(r"\d[ .\-]\d{3}")


def may_hold_secret(text: str) -> bool:
    """False when `text` holds nothing `redact` masks (beyond the environment's values)."""
    if LONG_RUN.search(text) or DIGIT_SHAPES.search(text):
        return True
    lowered = text.lower()
    return any(mark in lowered for mark in WORD_MARKS)


def may_hold_contact(text: str) -> bool:
    """False when `text` holds no email and no phone number."""
    return "@" in text or "+" in text or "(" in text or bool(PHONE_HINT.search(text))


def redactor(pii: bool = False) -> Callable[[str], str]:
    """A `redact` (or, with `pii`, a `redact_pii`) that knows the secrets of the environment as
    it is now (for hot paths)."""
    values = secret_values()

    def redact_known(text: str) -> str:
        for value in values:
            if value in text:
                text = text.replace(value, MASK)
        if may_hold_secret(text):
            text = mask_payment_and_ids(mask_secrets(text))
        return mask_contacts(text) if pii and may_hold_contact(text) else text

    return redact_known


def memoized(masked: Callable[[str], str], size: int = 1 << 16) -> Callable[[str], str]:
    """`masked` remembering its last `size` texts: production repeats a session's messages in
    every model call's history, and each is masked once."""
    return lru_cache(maxsize=size)(masked)


def redact(text: str) -> str:
    """Text with every known secret value, key-shaped string, password, card number, CVV and
    SSN masked."""
    return redactor()(text)


def redact_pii(text: str) -> str:
    """`redact`, and emails and phone numbers masked too: for text taken from production that
    people or models read (persona examples, fidelity reports, `traces show`)."""
    return redactor(pii=True)(text)


def redact_data(value: Any, text: Callable[[str], str] | None = None) -> Any:
    """`value` (JSON-like data: dicts, lists, strings, numbers) with every string, keys
    included, passed through `text` (`redact` by default)."""
    text = text or redactor()
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {
            text(k) if isinstance(k, str) else k: redact_data(v, text) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact_data(v, text) for v in value]
    return value

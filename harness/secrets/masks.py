"""The placeholders masked text shows: they say what was there (`[REDACTED:github-token]`,
`[PII:email]`), so masked text stays readable for people and judges."""

from __future__ import annotations

MASK = "[REDACTED]"


def secret_mask(kind: str) -> str:
    """The placeholder of a secret of a known kind: `[REDACTED:github-token]`."""
    return f"[REDACTED:{kind}]"


def pii_mask(kind: str) -> str:
    """The placeholder of personal data: `[PII:email]`."""
    return f"[PII:{kind}]"

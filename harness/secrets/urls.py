"""The passwords of URLs (`scheme://user:PASSWORD@host`, `?password=`) masked: a database URL
may be printed, its password never."""

from __future__ import annotations

import re

from harness.secrets.masks import MASK

# `scheme://user:PASSWORD@host`: the password runs to the last `@` on the line (a password may
# hold `#?/@` and spaces), at most 256 characters; the host may be empty (`@/db?host=/socket`).
URL_USERINFO = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s\"'<>]*:)(?P<password>[^\n\"'<>]{1,256})@"
    r"(?=[^\s\"'<>@]|$)"
)
PORT_THEN_TEXT = re.compile(r"\d{1,5}(?:[/?#]|\s|$)")
QUERY_PASSWORD = re.compile(
    r"([?&;](?:password|passwd|pwd|pass|secret|token|api[_-]?key|access_token)=)[^&#\s\"']+",
    re.IGNORECASE,
)


def _url_password(match: re.Match[str]) -> str:
    password = match.group("password")
    if password.startswith("[REDACTED"):
        return match.group()
    if PORT_THEN_TEXT.match(password) and re.search(r"\s", password):
        return match.group()  # `http://host:8080/v1 ... jane@x.example`: a port, not a password
    return f"{match.group('head')}{MASK}@"


def url_passwords(text: str) -> list[str]:
    """The passwords of the URLs in `text`, as `mask_url_passwords` finds them (to mask them
    where a driver's message quotes a piece of one)."""
    found = [m.group("password") for m in URL_USERINFO.finditer(text)] if "://" in text else []
    return [p for p in found if mask_url_passwords(f"x://u:{p}@h") != f"x://u:{p}@h"]


def mask_url_passwords(text: str) -> str:
    """`text` with the password of every URL in it masked (`user:PASSWORD@host`, the whole
    password up to the last `@` before the host; `?password=`): a database URL may be printed,
    its password never."""
    if "://" in text:
        text = URL_USERINFO.sub(_url_password, text)
    if "=" in text:
        text = QUERY_PASSWORD.sub(rf"\1{MASK}", text)
    return text

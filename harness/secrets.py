"""Keep keys, passwords and personal data out of everything the harness writes: errors, logs,
stores, traces, reports, and whatever it makes from production traces.

The one redaction layer. Keys are only ever handed to SDK clients; anything that becomes text
the harness keeps passes through `redact`, and text taken from production that is shown to
people or models (persona examples, fidelity reports, `traces show`) through `redact_pii`.

`redact` masks what no evaluation ever needs (README, "Secrets and personal data"):
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
  valid Luhn check digit), the CVV and expiry next to one or named as such, and US social
  security numbers: `[PII:card]`, `[PII:cvv]`, `[PII:card-expiry]`, `[PII:ssn]`.

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
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.IGNORECASE)
MASK = "[REDACTED]"


def secret_mask(kind: str) -> str:
    """The placeholder of a secret of a known kind: `[REDACTED:github-token]`."""
    return f"[REDACTED:{kind}]"


def pii_mask(kind: str) -> str:
    """The placeholder of personal data: `[PII:email]`."""
    return f"[PII:{kind}]"


@dataclass(frozen=True)
class Shape:
    """One detector: a regex whose `group` is masked with `mask`, looked for only in text
    holding one of `marks` (in the lowercased text when `lower`), kept only when `valid`."""

    marks: tuple[str, ...]
    pattern: re.Pattern[str]
    mask: str
    group: int = 0
    lower: bool = False
    valid: Callable[[str], bool] | None = None

    def apply(self, text: str, lowered: str) -> str:
        haystack = lowered if self.lower else text
        if not any(mark in haystack for mark in self.marks):
            return text
        return self.pattern.sub(self._replace, text)

    def _replace(self, match: re.Match[str]) -> str:
        value = match.group(self.group)
        if self.valid is not None and not self.valid(value):
            return match.group()
        if self.group == 0:
            return self.mask
        start, end = match.start(self.group) - match.start(), match.end(self.group) - match.start()
        whole = match.group()
        return whole[:start] + self.mask + whole[end:]


# --- keys and tokens: detect-secrets' plugins, where it has one ----------------------------

# (plugin module, class, marks, kind): the plugin's `denylist` regexes, used as they are.
PLUGINS: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("aws", "AWSKeyDetector", ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"), "aws-access-key-id"),
    (
        "github_token",
        "GitHubTokenDetector",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        "github-token",
    ),
    (
        "gitlab_token",
        "GitLabTokenDetector",
        (
            *("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "GR1348941"),
            *("glcbt-", "glimt-", "glptt-", "glagent-", "gloas-"),
        ),
        "gitlab-token",
    ),
    ("slack", "SlackDetector", ("xox", "hooks.slack.com"), "slack-token"),
    ("stripe", "StripeDetector", ("k_live_",), "stripe-key"),
    ("openai", "OpenAIDetector", ("T3BlbkFJ",), "openai-key"),
    ("pypi_token", "PypiTokenDetector", ("pypi-",), "pypi-token"),
    ("sendgrid", "SendGridDetector", ("SG.",), "sendgrid-key"),
    ("square_oauth", "SquareOAuthDetector", ("sq0csp-",), "square-secret"),
    ("azure_storage_key", "AzureStorageKeyDetector", ("AccountKey=",), "azure-storage-key"),
)
PLUGIN_MARKS = tuple(mark for _, _, marks, _ in PLUGINS for mark in marks)


@lru_cache(maxsize=1)
def plugin_shapes() -> tuple[Shape, ...]:
    """The detect-secrets plugins' regexes as shapes (imported on first need: the package
    costs ~150 ms to import, which a command that masks nothing should not pay)."""
    import importlib

    shapes = []
    for module, name, marks, kind in PLUGINS:
        plugin = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), name)
        for denied in plugin.denylist:
            if module == "aws" and denied.groups:  # its secret-key regex wants code around it
                continue
            # the whole token: a plugin may match a fixed length of a longer key
            regex = re.compile(rf"(?:{denied.pattern})[A-Za-z0-9_\-]*", denied.flags)
            lower = bool(regex.flags & re.IGNORECASE)
            shapes.append(
                Shape(
                    tuple(m.lower() for m in marks) if lower else marks,
                    regex,
                    secret_mask(kind),
                    lower=lower,
                )
            )
    return tuple(shapes)


def _jwt_valid(token: str) -> bool:
    from detect_secrets.plugins.jwt import JwtTokenDetector

    return bool(JwtTokenDetector.is_formally_valid(token))


def _aws_secret_valid(value: str) -> bool:
    """40 characters of base64 with both cases and a digit or symbol (a git sha is hex)."""
    return (
        any(c.isupper() for c in value)
        and any(c.islower() for c in value)
        and any(c.isdigit() or c in "/+" for c in value)
    )


SECRET_WORDS = (
    r"password|passwd|passphrase|pwd|secret|client[_-]?secret|secret[_-]?key|api[_-]?key"
    r"|x-api-key|access[_-]?key|access[_-]?token|auth[_-]?token|refresh[_-]?token|token"
)
# A value after `password:` or `password=` (quoted or not), or after "password is" when it
# looks like one (a digit or a symbol in it: "my password is hunter2", not "is expired").
PAIR = re.compile(
    rf"(?i)\b(?P<word>{SECRET_WORDS})\b(?P<sep>[\"']?\s*[:=]\s*[\"']?|\s+is\s+[\"']?)"
    r"(?P<value>(?!\[REDACTED|\[PII)(?:(?<=[\"'])[^\"'\n]+|[^\s\"'<>]+))"  # quoted: to the quote
)
TRAILING = re.compile(r"[,;.:!?)\]}]+$")


def _pair(match: re.Match[str]) -> str:
    word, sep, value = match.group("word"), match.group("sep"), match.group("value")
    end = TRAILING.search(value)  # "password: abc." ends with the sentence's period
    tail = end.group() if end else ""
    value = value[: len(value) - len(tail)]
    if not value:
        return match.group()
    lowered = word.lower()
    password = lowered.startswith("pass") or lowered == "pwd"
    if sep.lstrip().startswith("is") and not re.search(r"[\d\W_]", value):
        return match.group()  # "the password is expired"
    if not password and (len(value) < 8 or not re.search(r"\d", value)):
        return match.group()  # "token: none", "secret: yes"
    return f"{word}{sep}{secret_mask('password' if password else 'secret')}{tail}"


OWN_SHAPES: tuple[Shape, ...] = (
    Shape(
        ("-----BEGIN",),
        re.compile(
            r"-----BEGIN[A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END[A-Z ]*PRIVATE KEY-----|$)"
        ),
        secret_mask("private-key"),
    ),
    Shape(
        ("github_pat_",), re.compile(r"github_pat_[A-Za-z0-9_]{20,}"), secret_mask("github-token")
    ),
    Shape(("AIza",), re.compile(r"AIza[0-9A-Za-z_\-]{30,}"), secret_mask("google-api-key")),
    Shape(
        ("hf_",),
        re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}"),
        secret_mask("huggingface-token"),
    ),
    Shape(
        ("k_test_", "k_live_"),
        re.compile(r"\b[spr]k_(?:test|live)_[0-9a-zA-Z]{16,}"),
        secret_mask("stripe-key"),
    ),
    Shape(("sk-ant-",), re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}"), secret_mask("anthropic-key")),
    Shape(
        ("sk-",),
        re.compile(r"sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_\-]{16,}"),
        secret_mask("openai-key"),
    ),
    Shape(("sk-",), re.compile(r"sk-[A-Za-z0-9_\-]{16,}"), MASK),
    Shape(
        ("eyJ",),
        re.compile(r"eyJ[A-Za-z0-9_=-]{4,}\.[A-Za-z0-9_=-]{4,}(?:\.[A-Za-z0-9_+/=-]*)?"),
        secret_mask("jwt"),
        valid=_jwt_valid,
    ),
    Shape(("bearer",), re.compile(r"(?i)\bBearer\s+[A-Za-z0-9._~+/\-]{8,}=*"), MASK, lower=True),
    Shape(
        ("aws", "secret", "akia", "asia"),
        re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"),
        secret_mask("aws-secret-key"),
        lower=True,
        valid=_aws_secret_valid,
    ),
)

# --- URLs ---------------------------------------------------------------------------------

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


# --- personal data ------------------------------------------------------------------------

# 4-4-4-1..4(-1..3) digits (13-19) or Amex's 4-6-5, one separator (space, dash or none) between
CARD = re.compile(
    r"(?<![\d.\-])(?:\d{4}(?P<sep>[ \-]?)\d{4}(?P=sep)\d{4}(?P=sep)\d{1,4}"
    r"(?P<last>(?P=sep)\d{1,3})?|\d{4}(?P<amex>[ \-]?)\d{6}(?P=amex)\d{4,5})(?!\d)"
)
# What may stand between a card and its expiry or CVV: separators, and the words naming them.
CARD_GAP = (
    r"[\s,;:()/\-]{0,4}(?:(?i:cvv2?|cvc2?|cid|csc|security code|code|exp(?:iry|ires|iration)?"
    r"(?: date)?|valid thru)[\s,;:.\-]{0,3})?"
)
CARD_TAIL = re.compile(
    rf"(?P<gap>{CARD_GAP})(?:(?P<expiry>(?:0[1-9]|1[0-2])\s?/\s?(?:\d{{4}}|\d{{2}}))(?!\d)"
    rf"(?P<gap2>{CARD_GAP}))?(?P<cvv>(?<!\d)\d{{3,4}})(?![\d/])"
)
CVV_NAMED = re.compile(
    r"(?i)\b(?P<word>cvv2?|cvc2?|cid|csc|security code)\b(?P<sep>\W{0,3}(?:is\s+)?)"
    r"(?P<cvv>\d{3,4})\b"
)
EXPIRY_NAMED = re.compile(
    r"(?i)\b(?P<word>exp(?:iry|ires|iration)?(?: date)?|valid thru)\b(?P<sep>\W{0,3})"
    r"(?P<expiry>(?:0[1-9]|1[0-2])\s?/\s?(?:\d{4}|\d{2}))(?!\d)"
)
SSN = re.compile(r"(?<![\d\-])(?!000|666|9\d\d)\d{3}([ \-])(?!00)\d{2}\1(?!0000)\d{4}(?![\d\-])")
SSN_NAMED = re.compile(r"(?i)\b(ssn|social security(?: number)?)\b(\W{0,4}(?:is\s+)?)(\d{9})\b")
EMAIL = re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}")
PHONE = re.compile(
    r"(?<![\w+\-/.])(?:\+\d{1,3}[ .\-]?)?(?:\(\d{2,4}\)[ .\-]?|\d{2,4}[ .\-])\d{3,4}[ .\-]\d{3,4}"
    r"(?![\w\-/]|\.\d)"
    r"|(?<![\w+])\+\d{7,14}(?!\d)"
)
CARD_MASK = "[PII:card]"
CARD_PREFIXES = ("4", "5", "2", "34", "37", "36", "38", "30", "6", "35")


def luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def is_card(text: str) -> bool:
    """13-19 digits (spaces or dashes between), a card network's prefix, a valid Luhn digit."""
    digits = text.replace(" ", "").replace("-", "")
    return 13 <= len(digits) <= 19 and digits.startswith(CARD_PREFIXES) and luhn(digits)


def _cards(text: str) -> str:
    parts: list[str] = []
    last = 0
    for match in CARD.finditer(text):
        end = match.end()
        if not is_card(match.group()):
            if not (match.group("last") and match.group("sep")):
                continue
            end = match.start("last")  # "4111 1111 1111 1111 737": the card, then its CVV
            if not is_card(text[match.start() : end]):
                continue
        parts += [text[last : match.start()], pii_mask("card")]
        last = end
        tail = CARD_TAIL.match(text, last)
        if tail:  # "4111 1111 1111 1111, exp 12/27, 123"
            gap2 = tail.group("gap2") or ""
            expiry = pii_mask("card-expiry") if tail.group("expiry") else ""
            parts.append(f"{tail.group('gap')}{expiry}{gap2}{pii_mask('cvv')}")
            last = tail.end()
    if not parts:
        return text
    parts.append(text[last:])
    return "".join(parts)


def mask_payment_and_ids(text: str) -> str:
    """Card numbers (with the CVV and expiry next to them), named CVVs and US SSNs masked."""
    if not DIGIT_RUN.search(text):
        return text
    text = _cards(text)
    text = CVV_NAMED.sub(lambda m: f"{m['word']}{m['sep']}{pii_mask('cvv')}", text)
    if CARD_MASK in text:  # an expiry is card data only next to a card
        text = EXPIRY_NAMED.sub(lambda m: f"{m['word']}{m['sep']}{pii_mask('card-expiry')}", text)
    text = SSN.sub(pii_mask("ssn"), text)
    return SSN_NAMED.sub(lambda m: f"{m[1]}{m[2]}{pii_mask('ssn')}", text)


DIGIT_RUN = re.compile(r"\d{3}")


def mask_contacts(text: str) -> str:
    """Emails and phone numbers masked."""
    if "@" in text:
        text = EMAIL.sub(pii_mask("email"), text)
    if DIGIT_RUN.search(text):
        text = PHONE.sub(_phone, text)
    return text


def _phone(match: re.Match[str]) -> str:
    digits = sum(c.isdigit() for c in match.group())
    return pii_mask("phone") if 7 <= digits <= 15 else match.group()


# --- the layer ----------------------------------------------------------------------------

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


PAIR_MARKS = ("pass", "pwd", "secret", "key", "token")


def mask_secrets(text: str) -> str:
    """Key shapes, secret pairs and URL passwords masked (not the environment's values)."""
    text = mask_url_passwords(text)
    lowered = text.lower()
    if any(mark in text or mark in lowered for mark in PLUGIN_MARKS):
        for shape in plugin_shapes():
            text = shape.apply(text, lowered)
    for shape in OWN_SHAPES:
        text = shape.apply(text, lowered)
    if any(mark in lowered for mark in PAIR_MARKS):
        text = PAIR.sub(_pair, text)
    return text


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

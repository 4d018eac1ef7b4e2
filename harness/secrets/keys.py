"""Keys, tokens and passwords found in text: Yelp's `detect-secrets` plugins where it has one
(imported on first need), the shapes it has no plugin for, `password: ...` pairs, and URL
passwords (`urls`); each detector looked for only in text holding one of its literal marks."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from harness.secrets.masks import MASK, secret_mask
from harness.secrets.urls import mask_url_passwords


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
# The marks as two patterns, one search each instead of two per mark: those in lower case are
# looked for in the lowered text, the others (`AKIA`, `SG.`) as written.
_LOWER_MARKS = re.compile("|".join(re.escape(m) for m in PLUGIN_MARKS if m == m.lower()))
_CASED_MARKS = re.compile("|".join(re.escape(m) for m in PLUGIN_MARKS if m != m.lower()))


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

PAIR_MARKS = ("pass", "pwd", "secret", "key", "token")  # every one of SECRET_WORDS holds one
# What follows a mark in a pair: the rest of a secret word (`pass`+`word`, `secret`+`_key`),
# its end, then `:`, `=` or " is ".
PAIR_TAIL = re.compile(r"(?:word|wd|phrase|[_\-]?key)?(?!\w)(?:[\"']?\s*[:=]|\s+is\s)")


def may_hold_pair(lowered: str) -> bool:
    """Whether lowered text may hold a `password: ...` pair: a mark followed by a separator.
    Looked for from each mark (`str.find`), since PAIR itself is tried at every character and
    "token" alone is in most model output ("input_tokens")."""
    for mark in PAIR_MARKS:
        start = lowered.find(mark)
        while start != -1:
            if PAIR_TAIL.match(lowered, start + len(mark)):
                return True
            start = lowered.find(mark, start + 1)
    return False


def mask_secrets(text: str) -> str:
    """Key shapes, secret pairs and URL passwords masked (not the environment's values)."""
    text = mask_url_passwords(text)
    lowered = text.lower()
    if _CASED_MARKS.search(text) or _LOWER_MARKS.search(lowered):
        for shape in plugin_shapes():
            text = shape.apply(text, lowered)
    for shape in OWN_SHAPES:
        text = shape.apply(text, lowered)
    if may_hold_pair(lowered):
        text = PAIR.sub(_pair, text)
    return text

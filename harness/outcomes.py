"""What a tool's result and an agent's reply say about success, read the same way by the trace
converter (a production session) and by the `no_false_success` check (an episode).

Many apps return a tool's failure as a value instead of raising it (`{"error": "account jdoe is
locked"}`, `{"ok": false}`, an HTTP status); an agent that then tells the user "Done!" failed
silently, whatever the feedback says. The predicates are deliberately conservative: a result is
an error value only when a field whose meaning is fixed says so.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from harness.transcript import Message

EXCEPTION_TEXT = re.compile(
    r"^\s*(?:Traceback \(most recent call last\)|(?:[A-Za-z_][\w.]*)?(?:Error|Exception)\b\s*:)"
)
SUCCESS_CLAIM = re.compile(
    r"\b(done|all set|success(?:ful(?:ly)?)?|completed?|(?:has|have) been \w+|"
    r"i(?:'ve| have) (?!not?\b)\w+|i (?:(?!need\b)\w+ed|reset|sent|set up|made)|(?:is|are) now\b|"
    r"went through)\b",
    re.IGNORECASE,
)
ACKNOWLEDGED = re.compile(
    r"\b(could ?n[o']t|could not|can ?n[o']t|cannot|unable|fail(?:ed|ure|s)?|error|"
    r"sorry|problem|not able|did ?n[o']t|wasn'?t|isn'?t|blocked|locked|denied|try again|"
    r"unfortunately)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ErrorValues:
    """Which tool results are failures returned as values."""

    keys: tuple[str, ...] = ("error", "errors", "error_message", "exception")
    false_keys: tuple[str, ...] = ("ok", "success", "succeeded")
    status_keys: tuple[str, ...] = ("status", "state", "result")
    statuses: tuple[str, ...] = ("error", "failed", "failure", "fail")
    http_keys: tuple[str, ...] = ("status_code", "http_status", "statusCode", "code", "status")
    extra_keys: tuple[str, ...] = field(default=())  # the user's own: `--error-key NAME`

    @cached_property
    def _fields(self) -> frozenset[str]:
        return frozenset(
            self.keys + self.false_keys + self.status_keys + self.http_keys + self.extra_keys
        )

    def of(self, result: Any) -> str | None:
        """The failure a result states (its message), or None for a result that is no error."""
        if isinstance(result, dict) and not result.keys() & self._fields:
            return None  # the common case, decided without looking at a value
        if isinstance(result, str):
            text = result.strip()
            parsed = _json(text)
            if isinstance(parsed, str):
                text = parsed.strip()  # a JSON string: the text it holds
            elif parsed is not None:
                return self.of(parsed)
            return text.splitlines()[0][:300] if text and EXCEPTION_TEXT.match(text) else None
        if not isinstance(result, dict):
            return None
        for key in self.keys + self.extra_keys:
            value = result.get(key)
            if value not in (None, "", [], {}, False, 0):
                return _message(value)
        for key in self.false_keys:
            if result.get(key) is False:
                return _message(result.get("message") or result.get("detail") or f"{key}: false")
        for key in self.status_keys:
            value = result.get(key)
            if isinstance(value, str) and value.lower() in self.statuses:
                return _message(result.get("message") or result.get("detail") or f"{key}: {value}")
        for key in self.http_keys:
            value = result.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and 400 <= value < 600:
                return _message(result.get("message") or result.get("detail") or f"HTTP {value}")
        return None


DEFAULT = ErrorValues()


def _json(text: str) -> Any:
    if not text or text[0] not in '[{"':
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _message(value: Any) -> str:
    if isinstance(value, dict):
        value = value.get("message") or value.get("detail") or json.dumps(value, sort_keys=True)
    if isinstance(value, list):
        value = "; ".join(_message(v) for v in value[:3])
    return str(value)[:300]


def claims_success(reply: str) -> bool:
    """Whether a reply tells the user an action succeeded without saying anything failed."""
    return bool(SUCCESS_CLAIM.search(reply)) and not ACKNOWLEDGED.search(reply)


def false_successes(
    messages: list[Message], values: ErrorValues = DEFAULT, tool: str | None = None
) -> list[tuple[str, str, str]]:
    """(tool, what failed, the reply) for each failed tool call (a tool error, or a result that
    is an error value) whose next reply with text claims success."""
    found: list[tuple[str, str, str]] = []
    failed: tuple[str, str] | None = None
    for message in messages:
        if message.role == "tool" and (tool is None or message.name == tool):
            error = message.content if message.is_error else values.of(message.content)
            if error is not None:
                failed = (message.name or "a tool", error)
        elif message.role == "assistant" and message.content and failed is not None:
            if claims_success(message.content):
                found.append((*failed, message.content))
            failed = None
    return found

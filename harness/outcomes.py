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
# What says something failed. Empathy is no admission: "I'm sorry to hear that. Done!" claims
# success, so "sorry" (and "no problem") are not in this list.
ACKNOWLEDGED = re.compile(
    r"\b(could ?n[o'\u2019]t|could not|can ?n[o'\u2019]t|cannot|unable|fail(?:ed|ure|s)?|error|"
    r"not able|did ?n[o'\u2019]t|was ?n[o'\u2019]t|were ?n[o'\u2019]t|is ?n[o'\u2019]t|"
    r"blocked|locked|denied|"
    r"try again|unfortunately|went wrong|a problem|an issue|not (?:been |yet )?\w+ed)\b",
    re.IGNORECASE,
)
SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+|\n+")
NAME_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


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


def sentences(text: str) -> list[str]:
    """The sentences (and lines) of a reply."""
    return [part.strip() for part in SENTENCE_END.split(text) if part.strip()]


def claims_success(reply: str) -> bool:
    """Whether some sentence of a reply tells the user an action succeeded without saying, in
    that sentence, that something failed (an apology elsewhere is no admission)."""
    return any(SUCCESS_CLAIM.search(s) and not ACKNOWLEDGED.search(s) for s in sentences(reply))


@dataclass
class _Call:
    """A tool call of the current turn: its name, arguments, and what failed (None: it worked)."""

    name: str
    arguments: dict[str, Any]
    failure: str | None = None
    result: str = ""


def _marks(call: _Call, others: list[_Call]) -> list[re.Pattern[str]]:
    """What in a sentence names this call and no other call of the turn: its string arguments
    (a file name, an email), and the words of its tool's name (`upload` of `upload_document`)
    that no other tool's name has; a value another call also used or returned (the claim id
    both a filing and an upload carry) names neither."""
    shared = " ".join(
        json.dumps(o.arguments, ensure_ascii=False) + " " + o.result for o in others
    ).casefold()
    other_words = {w.casefold() for o in others for w in NAME_WORDS.findall(o.name)}
    marks = []
    for value in call.arguments.values():
        if isinstance(value, str) and len(value) >= 3 and value.casefold() not in shared:
            marks.append(re.compile(rf"(?<!\w){re.escape(value)}(?!\w)", re.IGNORECASE))
    for word in NAME_WORDS.findall(call.name):
        if len(word) >= 4 and word.casefold() not in other_words:
            marks.append(re.compile(rf"\b{re.escape(word)}", re.IGNORECASE))
    return marks


def false_claim(reply: str, failed: _Call, turn: list[_Call]) -> bool:
    """Whether `reply` tells the user the failed call worked: a sentence claiming success about
    it (naming its arguments or its tool), whatever else the reply says; or a bare claim
    ("Done!") naming no other call, when no sentence says something failed."""
    others = [c for c in turn if c is not failed]
    mine = _marks(failed, others)
    theirs = [m for o in others if o.failure is None for m in _marks(o, [failed])]
    said = sentences(reply)
    admitted = any(ACKNOWLEDGED.search(s) for s in said)
    for sentence in said:
        if not SUCCESS_CLAIM.search(sentence) or ACKNOWLEDGED.search(sentence):
            continue
        if any(m.search(sentence) for m in mine):
            return True
        if not admitted and not any(m.search(sentence) for m in theirs):
            return True
    return False


def false_successes(
    messages: list[Message], values: ErrorValues = DEFAULT, tool: str | None = None
) -> list[tuple[str, str, str]]:
    """(tool, what failed, the reply) for each failed tool call (a tool error, or a result that
    is an error value) whose next reply with text claims it succeeded (`false_claim`)."""
    found: list[tuple[str, str, str]] = []
    asked: dict[str, _Call] = {}
    turn: list[_Call] = []
    for message in messages:
        for request in message.tool_calls:
            asked[request.id] = _Call(request.name, request.arguments)
        if message.role == "tool":
            done = asked.get(message.tool_call_id or "") or _Call(message.name or "a tool", {})
            done.name = message.name or done.name
            done.failure = message.content if message.is_error else values.of(message.content)
            done.result = message.content
            turn.append(done)
        elif message.role == "assistant" and message.content:
            for done in turn:
                if done.failure is None or (tool is not None and done.name != tool):
                    continue
                if false_claim(message.content, done, turn):
                    found.append((done.name, done.failure, message.content))
                    break
            turn = []
    return found

"""How the words of production text are read, each pattern built in one place: a message's
*template*, a value as a whole token or however its words are joined, a note's sentiment, a reply
telling the user a value was not found. The failure readers (`failures`), the signatures
(`clusters`) and the checks derived from them (`derive`) all read text through these, so that
they agree on what a message says.

Templates replace what varies between occurrences of one failure: the call's own argument values
(by name, quoted or not), emails, URLs, UUIDs, amounts, ids and other tokens mixing letters and
digits, numbers, and quoted strings. This is a regular expression normaliser rather than a
log-template miner such as `drain3`: drain3 learns its templates from the lines it has seen, so
one message could get a different template (and its task a different file name) from one
conversion to the next; a fixed normaliser gives the same message the same signature whatever
else is converted, which keeps conversion idempotent.
"""

from __future__ import annotations

import functools
import re
from typing import Any

# An email ends with a word, never with the period of the sentence it stands in.
EMAILS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_MASKS = [
    (EMAILS, "<email>"),
    (re.compile(r"\bhttps?://\S+"), "<url>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\b"), "<uuid>"),
    (re.compile(r"[$€£]\s?\d+(?:[.,]\d+)*|\b\d+(?:[.,]\d+)*\s?(?:USD|EUR|GBP)\b"), "<amount>"),
    (re.compile(r"\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[\w-]+\b"), "<id>"),
    (re.compile(r"\d+(?:[.,]\d+)*"), "<n>"),
    (re.compile(r"'[^']*'|\"[^\"]*\""), "<str>"),
]
# A note's sentiment, read from its words: praise ("Quick and easy, thanks!") against complaint
# ("should be water damage, not flood"). Deliberately small: a note is a complaint unless its
# praise outweighs it, and a thumbs-up tips a note with neither.
PRAISE = re.compile(
    r"\b(thanks?|thank you|thx|great|quick(?:ly)?|fast|easy|easily|perfect(?:ly)?|helpful|"
    r"excellent|awesome|amazing|love[ds]?|nice|smooth(?:ly)?|good job|well done|brilliant|"
    r"fantastic|appreciated?|wonderful|spot on|painless|clear|friendly|worked)\b",
    re.IGNORECASE,
)
COMPLAINT = re.compile(
    r"\b(wrong(?:ly)?|should(?:n['\u2019]t)?|not|never|n['\u2019]t|failed|fails?|bad|incorrect(?:ly)?|"
    r"errors?|still|but|however|instead|missing|useless|terrible|awful|broken|ignored|lied|"
    r"false(?:ly)?|mistakes?|nothing|waste|slow|confus\w*|frustrat\w*|annoy\w*|rude|"
    r"unhelpful|hallucinat\w*|never|claimed|pretended)\b|n['\u2019]t\b",
    re.IGNORECASE,
)
# What a reply says when it tells the user a value they gave was not found, or asks them to
# check it: the handling of a mistyped id.
TOLD_NOT_FOUND = (
    r"(?:not (?:be )?(?:found|find|locate|exist|see|match|valid|recogni[sz]e)|"
    r"n['\u2019]t (?:find|locate|exist|see|match|recogni[sz]e|seem to exist)|"
    r"unable to (?:find|locate)|"
    r"no (?:such|record|match|\w+ (?:with|under|matching|for) (?:that|this))|"
    r"invalid|unknown|double[- ]?check|check (?:the|that|this|your|it)|confirm|verify|typo|"
    r"re-?enter|correct (?:number|id)|right (?:number|id))"
)


def template(text: str, values: dict[str, str] | None = None) -> str:
    """What stays the same between occurrences of one message: `KeyError: 'Ticket T-9001 not
    found'` and `... 'Ticket T-9002 not found'` both give `ticket <id> not found`. `values`
    (argument name: value) are masked by name wherever they stand, quoted or not: `account
    jdoe is locked` with `username: jdoe` gives `account <username> is locked`."""
    text = text.strip()
    if len(text) > 1 and text[0] == text[-1] and text[0] in "'\"" and text[0] not in text[1:-1]:
        text = text[1:-1]  # the repr of a KeyError's argument: the whole message is quoted
    for name, value in sorted((values or {}).items(), key=lambda item: -len(item[1])):
        if len(value) >= 3 and value.casefold() in text.casefold():
            text = re.sub(rf"(?<!\w){re.escape(value)}(?!\w)", f"<{name}>", text, flags=re.I)
    for pattern, mask in _MASKS:
        text = pattern.sub(mask, text)
    return " ".join(text.lower().split())



def sentiment(note: str) -> int:
    """How a note reads: above 0 praise, below 0 a complaint, 0 neither (counted words)."""
    return len(PRAISE.findall(note)) - len(COMPLAINT.findall(note))


def token(value: str) -> str:
    """A regular expression for `value` as a whole token: not inside a longer word or id
    (`CLM-1` is not in `CLM-12`)."""
    return rf"(?<![\w-]){re.escape(value)}(?![\w-])"


def value_pattern(value: Any) -> str:
    """A regular expression for an argument's value however its words are joined: `water_damage`
    also as "water damage" and "water-damage" (empty for a value without words)."""
    return r"[\s_-]+".join(re.escape(p) for p in re.split(r"[\s_-]+", str(value)) if p)


def told_not_found(value: str) -> str:
    """A regular expression for a reply that names `value` and says it was not found, or asks
    the user to check it (whichever comes first, within one reply)."""
    named = token(value)
    return rf"(?is){named}.*\b{TOLD_NOT_FOUND}|\b{TOLD_NOT_FOUND}.*{named}"



def names(text: str, value: Any) -> bool:
    """Whether a note names a value (`water_damage` read as "water damage" too)."""
    pattern = _named(str(value))
    return pattern is not None and pattern.search(text) is not None


@functools.lru_cache(maxsize=4096)
def _named(value: str) -> re.Pattern[str] | None:
    pattern = value_pattern(value)
    if not pattern:
        return None
    return re.compile(rf"(?<!\w){pattern}(?!\w)", re.IGNORECASE)

"""Personal data found in text: payment cards (a network's prefix and a valid Luhn digit, with
the CVV and expiry next to them), named CVVs, US social security numbers, and contact details
(emails, phone numbers), each masked as what it was (`[PII:card]`)."""

from __future__ import annotations

import re

from harness.secrets.masks import pii_mask

# 4-4-4-1..4(-1..3) digits (13-19) or Amex's 4-6-5, one separator (space, dash or none) between,
# standing alone: a digit run inside a word or a hex digest ("5ce4631674059041", a SHA-256) is
# none, and masking it would corrupt the digests the harness stores (a task's content hash).
# Each digit pattern starts with a plain `\d` (the lookbehind after it), so that the regex engine
# skips to the next digit in C: a lookbehind first is tried at every character, 7 times slower.
CARD = re.compile(
    r"\d(?<![A-Za-z\d.\-]\d)(?:\d{3}(?P<sep>[ \-]?)\d{4}(?P=sep)\d{4}(?P=sep)\d{1,4}"
    r"(?P<last>(?P=sep)\d{1,3})?|\d{3}(?P<amex>[ \-]?)\d{6}(?P=amex)\d{4,5})(?![A-Za-z\d])"
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
# An SSN's shape; its area number (never 000, 666 or 9xx) is checked by `_ssn`.
SSN = re.compile(r"\d(?<![\d\-]\d)\d\d([ \-])(?!00)\d{2}\1(?!0000)\d{4}(?![\d\-])")
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
    """Card numbers (with the CVV and expiry next to them), named CVVs and US SSNs masked.

    The SSN and named patterns run only on text that holds what any of their matches holds (an
    SSN's digit groups, a CVV's or an SSN's name): most text holds none, and these checks cost
    a quarter or less of the patterns they spare (every stored episode passes here)."""
    if not DIGIT_RUN.search(text):
        return text
    text = _cards(text)
    if _names(text, CVV_WORDS):
        text = CVV_NAMED.sub(lambda m: f"{m['word']}{m['sep']}{pii_mask('cvv')}", text)
    if CARD_MASK in text:  # an expiry is card data only next to a card
        text = EXPIRY_NAMED.sub(lambda m: f"{m['word']}{m['sep']}{pii_mask('card-expiry')}", text)
    if SSN_DIGITS.search(text):
        text = SSN.sub(_ssn, text)
    if _names(text, SSN_WORDS):
        text = SSN_NAMED.sub(lambda m: f"{m[1]}{m[2]}{pii_mask('ssn')}", text)
    return text


def _ssn(match: re.Match[str]) -> str:
    area = match.group()[:3]
    return match.group() if area in ("000", "666") or area[0] == "9" else pii_mask("ssn")


def _names(text: str, words: tuple[str, ...]) -> bool:
    """Whether `text` holds one of `words` in any case (`casefold`, as the patterns' `(?i)`)."""
    folded = text.casefold()
    return any(word in folded for word in words)


DIGIT_RUN = re.compile(r"\d{3}")
SSN_DIGITS = re.compile(r"\d{3}[ \-]\d\d[ \-]\d{4}")
CVV_WORDS = ("cvv", "cvc", "cid", "csc", "security code")
SSN_WORDS = ("ssn", "social security")


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

"""How one user turn is read: the facts it gives, whether it asks back, leaves or accepts,
its words and typos, and how it reacts to an agent error. Each is a small pure function of the
text, so that the session measures (`harness.production.behaviour`) are sums of them and a
reader can check any one turn by hand.

Reactions are read from what the user saw, because that is what a user reacts to:
- an *error event* is an agent reply that tells the user something failed or cannot be done
  (`reactions.AGENT_ERROR`: cannot, unable, failed, unavailable, unfortunately, ...), or a turn
  whose tool failed (raised, or returned an error value) where the reply does not claim success
  (`outcomes.SUCCESS_CLAIM`). An apology or empathy alone ("I'm sorry to hear that", "sorry
  for the wait") refuses nothing: real agents say it before a question or a success, and
  reading it as a refusal turned the answers that follow into "pivots". A success claimed
  after a failed tool ("Done!" after a failed upload) hides the failure: the user saw a
  success, so a "thanks" after it is no acceptance of an error;
- the user *abandons* when the session ends after the event without another word, or the next
  turn leaves (`reactions.LEAVE`: "forget it", "I give up", going elsewhere) without asking or
  giving anything; simulated users leave by saying so and then sending the harness's stop signal,
  production users by saying so or by silence, and both read as abandonment;
- the harness's control signals (`###STOP###` and the others) are not the user's words: they are
  removed before measuring, and a turn that held nothing else is the user leaving, as silence is
  in production.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.defaults import STOP_SIGNALS
from harness.domains import Environment, trace_replay
from harness.outcomes import DEFAULT, SUCCESS_CLAIM, ErrorValues
from harness.production.convert import IDS
from harness.production.derive import AMOUNTS
from harness.production.wording import EMAILS
from harness.reactions import LEAVE, reports_error
from harness.transcript import Message

HASH_IDS = re.compile(r"#\d+\b")  # `#1234`
DIGIT_RUNS = re.compile(r"\b\d{4,}\b")  # long numbers: accounts, phone numbers, references
DATES = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}[/.]\d{1,2}[/.]\d{2,4}\b"
    r"|\b\d{1,2} (?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b",
    re.IGNORECASE,
)
# ids as users write them: `p-6936` is the fact `P-6936`
ANY_CASE_IDS = re.compile(IDS.pattern, re.IGNORECASE)
FACTS: tuple[re.Pattern[str], ...] = (EMAILS, AMOUNTS, ANY_CASE_IDS, HASH_IDS, DIGIT_RUNS, DATES)
WORDS = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
QUESTION_WORDS = re.compile(
    r"^\s*(what|why|how|when|where|which|who|whom|whose|can|could|would|will|do|does|did|is|"
    r"are|should)\b",
    re.IGNORECASE,
)
SENTENCES = re.compile(r"[.!;\n]+")
SIGNALS = re.compile("|".join(re.escape(signal) for signal in STOP_SIGNALS))
PUSHBACK = re.compile(
    r"\b(no|still|again|already|told you|insist|unacceptable|ridiculous|seriously|come on|"
    r"why not|that's wrong|not what i)\b",
    re.IGNORECASE,
)
ACCEPT = re.compile(
    r"\b(ok|okay|fine|alright|all right|thanks|thank you|never ?mind|understood|got it|i see)\b",
    re.IGNORECASE,
)
ACCEPT_WORDS = 8  # an accepting turn is at most this long (longer ones go on to something)
EMOJI = re.compile("[\U0001f300-\U0001faff\u2600-\u27bf]")
VOWELS = re.compile(r"[aeiouy]", re.IGNORECASE)
TRIPLED = re.compile(r"([^\W\d_])\1\1", re.IGNORECASE)
# interjections written without vowels on purpose, not typos
INTERJECTIONS = re.compile(r"^(h*m+h*|s+h+|p+s+t+|b+r+|g+r+|t+s+k+|p+f+t+|z+|h+m+p+h+)$", re.I)
# word overlap (Jaccard) with an earlier user turn from which a turn restates it
REPHRASE_OVERLAP = 0.4


def fact_patterns(domain: type[Environment] | None) -> tuple[re.Pattern[str], ...]:
    """`FACTS`, and the kinds of ids the domain declares (`TraceReplay.id_patterns`)."""
    declared = trace_replay.id_patterns(domain) if domain is not None else {}
    return FACTS + tuple(re.compile(pattern) for pattern in declared.values())


def facts(text: str, patterns: Sequence[re.Pattern[str]] = FACTS) -> set[str]:
    """The distinct facts a text gives: emails, amounts, ids (`AB-12`, `#1234`), runs of four
    or more digits and dates, as written (case-folded); a match inside a longer one (the
    year of a date) is part of it, not a fact of its own."""
    found = sorted(
        (m.start(), -m.end(), m.group()) for pattern in patterns for m in pattern.finditer(text)
    )
    kept: set[str] = set()
    reach = 0  # where the last kept fact ends
    for start, end, value in found:
        if start >= reach:
            kept.add(value.rstrip(".").casefold())  # an email that ends a sentence
            reach = -end
    return kept


def disclosure_first(users: list[str], patterns: Sequence[re.Pattern[str]] = FACTS) -> float | None:
    """Share of all distinct facts of the user turns that the first one holds; None: none."""
    given = set().union(*(facts(u, patterns) for u in users)) if users else set()
    return len(facts(users[0], patterns) & given) / len(given) if given else None


def asks_back(text: str) -> bool:
    """A turn that asks: it contains `?` or one of its sentences starts with a question word."""
    return "?" in text or any(QUESTION_WORDS.match(s) for s in SENTENCES.split(text))


def words(text: str) -> list[str]:
    """The words of a text: runs of letters (an apostrophe inside kept), case-folded."""
    return [w.casefold() for w in WORDS.findall(text)]


def overlap(one: str, other: str) -> float:
    """Jaccard overlap of the two texts' sets of words (0 when either has none)."""
    a, b = set(words(one)), set(words(other))
    return len(a & b) / len(a | b) if a and b else 0.0


def sees_error(reply: str, tool_failed: bool = False) -> bool:
    """Whether the user was shown an error: the reply reports one, or a tool of the turn failed
    and the reply does not claim success (a claimed success hides the failure from the user)."""
    return reports_error(reply) or (tool_failed and not SUCCESS_CLAIM.search(reply))


def leaves(text: str) -> bool:
    """A turn that leaves the conversation: leaving words (`LEAVE`), no question, no fact."""
    return bool(LEAVE.search(text)) and not asks_back(text) and not facts(text)


def accepts(text: str) -> bool:
    """A turn that accepts the answer: short, accepting words, no question, no fact."""
    return (
        bool(ACCEPT.search(text))
        and len(words(text)) <= ACCEPT_WORDS
        and not asks_back(text)
        and not facts(text)
    )


def reaction(reply: str | None, earlier: list[str]) -> str:
    """What a user's next turn does after an agent error, the first that applies: `abandon`
    (no next turn, or a turn that `leaves`), `pushback` (insisting words), `rephrase` (overlaps
    an earlier user turn), `accept` (see `accepts`), else `pivot`."""
    if reply is None or leaves(reply):
        return "abandon"
    if PUSHBACK.search(reply):
        return "pushback"
    if any(overlap(reply, e) >= REPHRASE_OVERLAP for e in earlier):
        return "rephrase"
    return "accept" if accepts(reply) else "pivot"


def letters_share(texts: list[str], predicate: str) -> float:
    """Share of the letters of the texts that are upper case (`upper`) or ASCII (`ascii`)."""
    letters = [c for t in texts for c in t if c.isalpha()]
    if not letters:
        return 0.0 if predicate == "upper" else 1.0
    test = str.isupper if predicate == "upper" else str.isascii
    return sum(test(c) for c in letters) / len(letters)


def is_typo(word: str) -> bool:
    """A crude typo proxy for a word as written: the pronoun `i` in lower case, or (three
    letters or more) no vowel, or a letter tripled; interjections (hmm, shh, psst, grr, ...)
    are not typos."""
    if INTERJECTIONS.match(word):
        return False
    return word == "i" or (len(word) >= 3 and not VOWELS.search(word)) or bool(TRIPLED.search(word))


def typos(texts: list[str]) -> float:
    """Share of the texts' words that `is_typo` flags (the pronoun `i` as written)."""
    found = [w for t in texts for w in WORDS.findall(t)]
    return sum(map(is_typo, found)) / len(found) if found else 0.0


def share(texts: list[str], test: Callable[[str], object]) -> float:
    """Share of the texts for which `test` is true; 0 without texts."""
    return sum(bool(test(t)) for t in texts) / len(texts) if texts else 0.0


@dataclass
class Exchange:
    """A user turn and the agent's reply to it (None: the session ended before one)."""

    user: str
    reply: str | None
    tool_error: bool = False

    @property
    def error_event(self) -> bool:
        """The user was shown an error here (see `sees_error`)."""
        return self.reply is not None and sees_error(self.reply, self.tool_error)


def user_words(text: str) -> str:
    """A user turn without the harness's control signals (`###STOP###`, ...)."""
    return SIGNALS.sub(" ", text).strip() if "###" in text else text.strip()


def exchanges(messages: list[Message], error_values: ErrorValues = DEFAULT) -> list[Exchange]:
    """The user turns in order (their control signals removed; a turn of nothing else is no
    turn), each with the agent's visible reply and whether a tool of that turn failed (raised,
    or returned an error value); messages before the first user turn are ignored."""
    found: list[Exchange] = []
    for message in messages:
        if message.role == "user":
            if text := user_words(message.content):
                found.append(Exchange(text, None))
        elif (
            found
            and message.role == "tool"
            and (message.is_error or error_values.of(message.content) is not None)
        ):
            found[-1].tool_error = True
        elif found and message.role == "assistant" and message.content:
            last = found[-1]
            last.reply = (
                message.content if last.reply is None else f"{last.reply}\n{message.content}"
            )
    return found


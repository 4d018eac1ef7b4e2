"""How real users behave, measured per production session from their own turns.

Every dimension is a small pure function of the conversation's messages, documented by what
it counts, so that the same measures apply to simulated conversations (the sim-to-real report)
and to production sessions read by `measure_calls` through the sources and reconstruction
`harness traces to-tasks` uses. Words and patterns are deliberately crude, language-neutral
where possible, and stated here: a measure is only useful when everyone knows what it counts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from harness.domains import Environment, trace_replay
from harness.outcomes import DEFAULT, ErrorValues
from harness.production.calls import CallRecord, Filters, Unreadable
from harness.production.convert import IDS, POLITE
from harness.production.derive import AMOUNTS
from harness.production.failures import EMAILS, admitted, failure_of
from harness.production.reconstruct import Conversation, conversations
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
REFUSAL = re.compile(
    r"\b(sorry|apologi[sz]e|apologies|cannot|can't|can ?not|unable|not able|error|failed|"
    r"not allowed|not possible)\b",
    re.IGNORECASE,
)
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
REACTIONS = ("pushback", "rephrase", "pivot", "accept", "abandon")


class SessionBehaviour(BaseModel):
    """The behavioural dimensions of the user of one session (None: nothing to measure)."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(default="", description="The session: `thread ID` or `trace ID`.")
    disclosure_first: float | None = Field(
        default=None,
        description="Share of the distinct facts (emails, ids, long numbers, dates, amounts) "
        "the user gave over the session that were already in the first user message: 1 "
        "front-loads, low values disclose gradually; None when the user gave no fact.",
    )
    asks_back: float = Field(
        default=0.0,
        description="Share of user turns that ask back: contain `?` or have a sentence that "
        "starts with a question word (what, why, how, can, could, is, ...).",
    )
    clarify: float | None = Field(
        default=None,
        description="Share of the user's answers to an agent question (a turn after an agent "
        "reply with `?` that is not an error or refusal) that ask back instead (see "
        "`asks_back`). None: the agent asked nothing.",
    )
    answers: int = Field(default=0, description="The user's turns that answer an agent question.")
    ambiguous_start: bool = Field(
        default=False, description="The first user message holds no fact at all."
    )
    error_events: int = Field(
        default=0,
        description="Agent replies that are an error or a refusal (apology, cannot, unable, "
        "error words, or a tool error in the same turn).",
    )
    pushback: float | None = Field(
        default=None,
        description="Share of error events the user answered by insisting: negative or "
        "insisting words (no, still, again, already, told you, ...). None: no error event.",
    )
    rephrase: float | None = Field(
        default=None,
        description="Share of error events answered by restating an earlier request: word "
        f"overlap (Jaccard) of at least {REPHRASE_OVERLAP} with an earlier user turn, "
        "without pushback words. None: no error event.",
    )
    pivot: float | None = Field(
        default=None,
        description="Share of error events answered by anything else: a new request, a "
        "question, another topic. None: no error event.",
    )
    accept: float | None = Field(
        default=None,
        description=f"Share of error events answered by accepting: a turn of at most "
        f"{ACCEPT_WORDS} words with accepting words (ok, fine, thanks, never mind, ...), no "
        "question and no fact. None: no error event.",
    )
    abandon: float | None = Field(
        default=None,
        description="Share of error events after which the user said nothing more. None: no "
        "error event.",
    )
    user_turns: int = Field(default=0, description="Number of non-empty user turns.")
    abandoned: bool = Field(
        default=False,
        description="The session ends right after an agent error or refusal, or the session's "
        "attributes say its goal was not reached (`goal_reached: false`).",
    )
    words_per_turn: float = Field(default=0.0, description="Mean number of words per user turn.")
    question_rate: float = Field(default=0.0, description="Share of user turns containing `?`.")
    exclamation_rate: float = Field(default=0.0, description="Share of user turns containing `!`.")
    capitals: float = Field(
        default=0.0, description="Share of the user's letters that are upper case."
    )
    emoji_rate: float = Field(
        default=0.0, description="Share of user turns with an emoji or pictographic symbol."
    )
    typos: float = Field(
        default=0.0,
        description="Typo proxy: share of the user's words that are a lower-case `i`, have "
        "three or more letters and no vowel, or repeat a letter three times in a row.",
    )
    formality: float = Field(
        default=0.0,
        description="Formality proxy: greetings, please and thanks (hi, hello, please, "
        "thanks, thank you) per user turn.",
    )
    ascii_letters: float = Field(
        default=1.0,
        description="Language proxy: share of the user's letters that are ASCII (1 for "
        "English-like text, lower for other scripts and accented languages).",
    )


NUMERIC = tuple(
    name
    for name, field in SessionBehaviour.model_fields.items()
    if name not in {"key", "error_events", "answers"}
)  # the dimensions a profile reports (booleans count as 0/1)


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


def is_refusal(text: str) -> bool:
    """An agent reply that apologises, refuses or reports an error (see `REFUSAL`)."""
    return bool(REFUSAL.search(text))


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
    (no next turn), `pushback` (insisting words), `rephrase` (overlaps an earlier user turn),
    `accept` (see `accepts`), else `pivot`."""
    if reply is None:
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


def exchanges(messages: list[Message]) -> list[Exchange]:
    """The user turns in order, each with the agent's visible reply and whether a tool of
    that turn failed; messages before the first user turn are ignored."""
    found: list[Exchange] = []
    for message in messages:
        if message.role == "user" and message.content.strip():
            found.append(Exchange(message.content, None))
        elif found and message.role == "tool" and message.is_error:
            found[-1].tool_error = True
        elif found and message.role == "assistant" and message.content:
            last = found[-1]
            last.reply = (
                message.content if last.reply is None else f"{last.reply}\n{message.content}"
            )
    return found


def measure(
    messages: list[Message],
    key: str = "",
    goal_reached: bool | None = None,
    patterns: Sequence[re.Pattern[str]] = FACTS,
) -> SessionBehaviour:
    """The behaviour of the user of one conversation (see `SessionBehaviour`); `patterns`:
    what counts as a fact (`fact_patterns` adds a domain's ids)."""
    turns = exchanges(messages)
    users = [t.user for t in turns]
    if not users:
        return SessionBehaviour(key=key)
    events = [
        reaction(turns[i + 1].user if i + 1 < len(turns) else None, users[: i + 1])
        for i, t in enumerate(turns)
        if t.reply is not None and (t.tool_error or is_refusal(t.reply))
    ]
    rates = {r: (events.count(r) / len(events) if events else None) for r in REACTIONS}
    answered = [
        turns[i + 1].user
        for i, t in enumerate(turns[:-1])
        if t.reply is not None and "?" in t.reply and not (t.tool_error or is_refusal(t.reply))
    ]
    return SessionBehaviour(
        key=key,
        disclosure_first=disclosure_first(users, patterns),
        asks_back=share(users, asks_back),
        clarify=share(answered, asks_back) if answered else None,
        answers=len(answered),
        ambiguous_start=not facts(users[0], patterns),
        error_events=len(events),
        **rates,
        user_turns=len(users),
        abandoned=bool(events and events[-1] == "abandon") or goal_reached is False,
        words_per_turn=sum(len(words(u)) for u in users) / len(users),
        question_rate=share(users, lambda u: "?" in u),
        exclamation_rate=share(users, lambda u: "!" in u),
        capitals=letters_share(users, "upper"),
        emoji_rate=share(users, EMOJI.search),
        typos=typos(users),
        formality=sum(len(POLITE.findall(u)) for u in users) / len(users),
        ascii_letters=letters_share(users, "ascii"),
    )


def measure_conversation(
    conversation: Conversation, patterns: Sequence[re.Pattern[str]] = FACTS
) -> SessionBehaviour:
    """A production conversation's user behaviour; `goal_reached` from its attributes."""
    goal = conversation.attributes.get("goal_reached")
    return measure(
        conversation.transcript.messages,
        conversation.key,
        goal if isinstance(goal, bool) else None,
        patterns,
    )


def sessions(
    calls: Iterable[CallRecord],
    filters: Filters,
    problems: list[Unreadable],
    error_values: ErrorValues = DEFAULT,
) -> Iterator[Conversation]:
    """The sessions of the calls rebuilt as `traces to-tasks` rebuilds them, those the
    conversation-level filters (status, negative feedback, time, ops) admit; unreadable ones go
    to `problems`."""
    for conversation in conversations(calls, problems, error_values):
        if admitted(conversation, failure_of(conversation), filters):
            yield conversation


def measure_calls(
    calls: Iterable[CallRecord],
    problems: list[Unreadable],
    error_values: ErrorValues = DEFAULT,
    patterns: Sequence[re.Pattern[str]] = FACTS,
    filters: Filters | None = None,
) -> Iterator[SessionBehaviour]:
    """Each session of the calls (from any source `traces to-tasks` reads) that the filters
    admit, measured; unreadable ones go to `problems`."""
    for conversation in sessions(calls, filters or Filters(), problems, error_values):
        yield measure_conversation(conversation, patterns)

"""How real users behave, measured per production session from their own turns.

Every dimension is a small pure function of the conversation's messages, documented by what
it counts, so that the same measures apply to simulated conversations (the sim-to-real report)
and to production sessions read by `measure_calls` through the sources and reconstruction
`harness traces to-tasks` uses. Words and patterns are deliberately crude, language-neutral
where possible, and stated here: a measure is only useful when everyone knows what it counts.

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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from harness.defaults import STOP_SIGNALS
from harness.domains import Environment, trace_replay
from harness.outcomes import DEFAULT, SUCCESS_CLAIM, ErrorValues
from harness.production.calls import CallRecord, Filters, Unreadable
from harness.production.convert import IDS, POLITE
from harness.production.derive import AMOUNTS
from harness.production.failures import EMAILS, admitted, failure_of
from harness.production.reconstruct import Conversation, conversations
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
        description="Agent replies that tell the user of an error or a refusal (cannot, unable, "
        "failed, unavailable, unfortunately, ...; an apology alone is not one), or that follow "
        "a failed tool without claiming success. A success claimed after a failed tool is no "
        "event: the user was told it worked.",
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
        "question, another topic (an answer to a question the reply asked among them). None: "
        "no error event.",
    )
    accept: float | None = Field(
        default=None,
        description=f"Share of error events answered by accepting: a turn of at most "
        f"{ACCEPT_WORDS} words with accepting words (ok, fine, thanks, never mind, ...), no "
        "question and no fact. None: no error event.",
    )
    abandon: float | None = Field(
        default=None,
        description="Share of error events after which the user said nothing more, or left "
        "with words (forget it, I give up, going elsewhere; without a question or a fact). "
        "None: no error event.",
    )
    user_turns: int = Field(default=0, description="Number of non-empty user turns.")
    abandoned: bool = Field(
        default=False,
        description="The user left unsatisfied: the last error event was abandoned, or the "
        "last user turn leaves (see `abandon`), or the session's attributes say its goal was not "
        "reached (`goal_reached: false`).",
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
    # The style of the opening message alone. Every session has exactly one, written before
    # the agent did anything, so it shows the user and not the session's luck: the measures
    # over all turns also count the turns an agent error or a settled request added (a terse
    # user's "what are your store hours" after a refusal, "ok thanks anyway" after another),
    # and profiles clustered on them split one population by what happened to it.
    opening_words: float = Field(default=0.0, description="Words in the first user message.")
    opening_exclamation: bool = Field(
        default=False, description="The first user message contains `!`."
    )
    opening_capitals: float = Field(
        default=0.0, description="Share of the first user message's letters that are upper case."
    )
    opening_emoji: bool = Field(
        default=False, description="The first user message has an emoji or pictographic symbol."
    )
    opening_typos: float = Field(
        default=0.0, description="Share of the first user message's words that `is_typo` flags."
    )
    opening_formality: float = Field(
        default=0.0,
        description="Greetings, please and thanks (hi, hello, please, thanks, thank you) in the "
        "first user message.",
    )
    opening_ascii: float = Field(
        default=1.0, description="Share of the first user message's letters that are ASCII."
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


def measure(
    messages: list[Message],
    key: str = "",
    goal_reached: bool | None = None,
    patterns: Sequence[re.Pattern[str]] = FACTS,
    error_values: ErrorValues = DEFAULT,
    cut_off: bool = False,
) -> SessionBehaviour:
    """The behaviour of the user of one conversation (see `SessionBehaviour`); `patterns`:
    what counts as a fact (`fact_patterns` adds a domain's ids); `error_values`: which tool
    results are failures returned as values; `cut_off`: something other than the user ended
    the conversation (a simulated episode's turn limit or timeout), so an error in the last
    reply had no chance of a reaction and is not counted (not as an abandonment either)."""
    turns = exchanges(messages, error_values)
    users = [t.user for t in turns]
    if not users:
        return SessionBehaviour(key=key)
    events = [
        reaction(turns[i + 1].user if i + 1 < len(turns) else None, users[: i + 1])
        for i, t in enumerate(turns)
        if t.error_event and not (cut_off and i + 1 == len(turns))
    ]
    rates = {r: (events.count(r) / len(events) if events else None) for r in REACTIONS}
    answered = [
        turns[i + 1].user
        for i, t in enumerate(turns[:-1])
        if t.reply is not None and "?" in t.reply and not t.error_event
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
        abandoned=bool(events and events[-1] == "abandon")
        or (len(users) > 1 and leaves(users[-1]))
        or goal_reached is False,
        words_per_turn=sum(len(words(u)) for u in users) / len(users),
        question_rate=share(users, lambda u: "?" in u),
        exclamation_rate=share(users, lambda u: "!" in u),
        capitals=letters_share(users, "upper"),
        emoji_rate=share(users, EMOJI.search),
        typos=typos(users),
        formality=sum(len(POLITE.findall(u)) for u in users) / len(users),
        ascii_letters=letters_share(users, "ascii"),
        opening_words=len(words(users[0])),
        opening_exclamation="!" in users[0],
        opening_capitals=letters_share(users[:1], "upper"),
        opening_emoji=bool(EMOJI.search(users[0])),
        opening_typos=typos(users[:1]),
        opening_formality=len(POLITE.findall(users[0])),
        opening_ascii=letters_share(users[:1], "ascii"),
    )


def measure_conversation(
    conversation: Conversation,
    patterns: Sequence[re.Pattern[str]] = FACTS,
    error_values: ErrorValues = DEFAULT,
) -> SessionBehaviour:
    """A production conversation's user behaviour; `goal_reached` from its attributes."""
    goal = conversation.attributes.get("goal_reached")
    return measure(
        conversation.transcript.messages,
        conversation.key,
        goal if isinstance(goal, bool) else None,
        patterns,
        error_values,
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
        yield measure_conversation(conversation, patterns, error_values)

"""How real users behave, measured per production session from their own turns.

Every dimension is a small pure function of the conversation's messages, documented by what
it counts, so that the same measures apply to simulated conversations (the sim-to-real report)
and to production sessions read by `measure_calls` through the sources and reconstruction
`harness traces to-tasks` uses. Words and patterns are deliberately crude, language-neutral
where possible, and stated with them: a measure is only useful when everyone knows what it counts.

How each turn is read (facts, asking back, an agent error and the user's reaction to it):
`harness.production.turns`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from pydantic import BaseModel, ConfigDict, Field

from harness.outcomes import DEFAULT, ErrorValues
from harness.production.calls import CallRecord, Filters, Unreadable
from harness.production.convert import POLITE
from harness.production.failures import admitted, failure_of
from harness.production.reconstruct import Conversation, conversations
from harness.production.turns import (
    ACCEPT_WORDS,
    EMOJI,
    FACTS,
    REPHRASE_OVERLAP,
    asks_back,
    disclosure_first,
    exchanges,
    facts,
    leaves,
    letters_share,
    reaction,
    share,
    typos,
    words,
)
from harness.transcript import Message

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

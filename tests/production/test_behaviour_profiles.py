"""Behaviour measured from production sessions, and profiles recovered from a known mix."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from harness.production.behaviour import SessionBehaviour, measure, measure_calls
from harness.production.calls import Filters, Unreadable, read_jsonl
from harness.production.profiles import profiles
from harness.production.turns import disclosure_first, fact_patterns, facts, reaction, typos
from harness.sdk import TraceReplay
from harness.transcript import Message

REFUSAL = "Sorry, I cannot do that for you."
ASK = {"id": "Which reference is it about?", "email": "What email address do you use?"}
ASK["amount"] = "How much was it?"


def user(text: str) -> Message:
    return Message(role="user", content=text)


def agent(text: str) -> Message:
    return Message(role="assistant", content=text)


def session_calls(key: str, turns: list[tuple[str, str | None]]) -> list[dict]:
    """An app's session as exported calls: one `kind=agent` call per user turn, whose inputs
    carry the conversation so far and whose output is the reply (reconstruction's shape 2)."""
    said: list[dict] = []
    calls = []
    for n, (text, reply) in enumerate(turns):
        said = [*said, {"role": "user", "content": text}]
        calls.append(
            {
                "id": f"{key}-{n}",
                "project_id": "acme/app",
                "op_name": "weave:///acme/app/op/handle_turn:v1",
                "trace_id": f"{key}-trace-{n}",
                "parent_id": None,
                "thread_id": key,
                "started_at": f"2026-11-30T10:00:{n:02d}",
                "inputs": {"conversation": said},
                "output": reply or "",
                "attributes": {"weave": {"kind": "agent"}},
                "summary": {},
            }
        )
        said = [*said, {"role": "assistant", "content": reply or ""}]
    return calls


def values(rng: random.Random) -> dict[str, str]:
    return {
        "id": f"A-{rng.randint(100, 999)}",
        "email": f"user{rng.randint(1, 9999)}@example.com",
        "amount": f"${rng.randint(10, 99)}.00",
    }


FILLERS = ["so", "well", "ok", "right", "hmm", "look", "basically", "honestly", "just"]


def styled(rng: random.Random, text: str) -> str:
    """A user's turn with the noise real sessions have, whatever their population: a few
    filler words, sometimes an exclamation mark."""
    noise = " ".join(rng.choices(FILLERS, k=rng.randint(0, 4)))
    return f"{noise} {text}{'!' if rng.random() < 0.3 else ''}".strip()


def gradual(rng: random.Random, pushes: float) -> list[tuple[str, str | None]]:
    """Population A: one fact in the first message, one more per agent question, then it
    pushes back on the refusal (else rephrases its first request)."""
    fact = values(rng)
    turns: list[tuple[str, str | None]] = [
        (styled(rng, f"I need help with request {fact['id']}"), ASK["email"]),
        (styled(rng, f"it is {fact['email']}"), ASK["amount"]),
        (styled(rng, fact["amount"]), REFUSAL),
    ]
    if rng.random() < pushes:
        turns.append((styled(rng, "no, I already gave you all of it, do it"), "Done."))
    else:
        turns.append((styled(rng, f"I need help with request {fact['id']} please"), "Done."))
    return turns


def front_loading(
    rng: random.Random, pushes: float, accepts: float
) -> list[tuple[str, str | None]]:
    """Population B: every fact in the first message; after the refusal it pushes back, or
    accepts, or else pivots to another question."""
    fact = values(rng)
    first = f"Hello, please help with {fact['id']}, email {fact['email']}, {fact['amount']}. Thanks"
    turns: list[tuple[str, str | None]] = [(styled(rng, first), REFUSAL)]
    draw = rng.random()
    if draw < pushes:
        turns.append((styled(rng, "no, that is unacceptable"), "Done."))
    elif draw < pushes + accepts:
        turns.append((styled(rng, "fine, thanks"), None))
    else:
        turns.append((styled(rng, "okay, thanks. What are your opening hours"), "Nine to five."))
    return turns


def test_facts_and_disclosure() -> None:
    assert facts("Ref A-77, #1234, me@x.org, $12.50 on 2026-01-05, card 12345678") == {
        "a-77",
        "#1234",
        "me@x.org",
        "$12.50",
        "2026-01-05",
        "12345678",
    }
    assert disclosure_first(["about A-1", "and B-2", "me@x.org, A-1 again"]) == pytest.approx(1 / 3)
    assert disclosure_first(["hello", "nothing else"]) is None


def test_a_domain_adds_its_ids_to_the_facts() -> None:
    class Desk(TraceReplay):  # a domain's trace hooks come with the mix-in
        id_patterns = {"ticket": r"\bT\d{3}\b"}

    patterns = fact_patterns(Desk)  # type: ignore[arg-type]  # the mix-in alone declares ids
    assert facts("ticket T123", patterns) == {"t123"} and facts("ticket T123") == set()
    assert disclosure_first(["about T123", "and T456"], patterns) == 0.5


def test_a_tool_error_is_an_error_event() -> None:
    failed = Message(role="tool", content="KeyError", name="lookup", is_error=True)
    found = measure([user("check A-1"), failed, agent("Here it is."), user("check A-1 again")])
    assert (found.error_events, found.pushback) == (1, 1.0)
    assert measure([user("check A-1"), agent("Here it is.")]).pushback is None


def test_an_apology_is_no_refusal_and_a_hidden_failure_no_error_shown() -> None:
    """What the user reacts to is what the user was told: "I'm sorry to hear that" before a
    question is empathy (the answer after it is an answer, not a pivot); "Done!" after a failed
    upload tells the user it worked (the "thanks" after it accepts nothing); the same failure
    reported, or a failed tool whose reply claims nothing, is an error event."""
    sorry = measure([user("my screen cracked"), agent("I'm sorry to hear that. What is your "
                     "order number?"), user("NW-12345"), agent("Done!")])  # fmt: skip
    assert (sorry.error_events, sorry.pivot, sorry.answers, sorry.clarify) == (0, None, 1, 0.0)
    failed = Message(role="tool", content='{"status": "failed", "reason": "too large"}',
                     name="upload_photo")  # fmt: skip
    hidden = measure([user("repair it, photo attached"), failed,
                      agent("I'm sorry to hear that. Done! Your photo is attached."),
                      user("thanks")])  # fmt: skip
    assert (hidden.error_events, hidden.accept) == (0, None)
    reported = agent("The repair is open, but the photo upload failed.")
    told = measure([user("repair it, photo attached"), failed, reported, user("ok thanks")])
    assert (told.error_events, told.accept) == (1, 1.0)
    quiet = measure([user("repair it"), failed, agent("Anything else?"), user("ok thanks")])
    assert (quiet.error_events, quiet.accept) == (1, 1.0)
    refusals = ("Unfortunately that slot is no longer available.", "I can\u2019t do that.",
                "Sorry, I couldn't open the repair.", "The repair system is unavailable.")  # fmt: skip
    for refusal in refusals:
        assert measure([user("book it"), agent(refusal)]).error_events == 1, refusal
    for kind in ("Sorry for the wait! Here you go.", "Apologies, here is the link.", "Done!"):
        assert measure([user("book it"), agent(kind)]).error_events == 0, kind


def test_leaving_after_an_error_is_abandoning() -> None:
    """Leaving with words ("Forget it.", "I give up", going elsewhere; without a question or a
    fact) abandons, as silence does; the harness's stop signal is not the user's words, and a
    turn of nothing else is silence."""
    refusal = "Sorry, I cannot do that."
    for leaving in ("Forget it.", "ugh, I give up", "useless. I'll go somewhere else",
                    "No, forget it ###STOP###", "###STOP###"):  # fmt: skip
        found = measure([user("do X-1"), agent(refusal), user(leaving)])
        assert (found.abandon, found.abandoned) == (1.0, True), leaving
    assert measure([user("do X-1"), agent(refusal), user("###STOP###")]).user_turns == 1
    for staying in ("Forget it, what are your hours?", "forget it, use A-2 instead"):
        found = measure([user("do X-1"), agent(refusal), user(staying)])
        assert found.abandon == 0.0 and not found.abandoned, staying
    said = measure([user("OK, I understand. Thanks anyway. ###STOP###")])
    assert said.words_per_turn == 5  # no STOP
    assert said.capitals == pytest.approx(4 / 25)  # O, K, I, T
    # leaving without an agent error: the session is abandoned, no reaction is counted
    patience = measure([user("do X-1"), agent("Which one?"), user("forget it")])
    assert (patience.abandoned, patience.error_events) == (True, 0)


def test_facts_as_users_write_them() -> None:
    assert facts("it is p-6936, mail me at a@b.example.") == {"p-6936", "a@b.example"}
    assert disclosure_first(["P-6936 please", "again: p-6936, a@b.example."]) == 0.5
    assert typos(["hmm ok", "i think shh"]) == pytest.approx(1 / 5)  # only the lower-case i


def test_clarify_counts_the_answers_to_agent_questions() -> None:
    asked = measure(
        [user("book me in"), agent("What is your id?"), user("why do you need it?"),
         agent("To find you. What is it?"), user("P-1"), agent("Done."), user("thanks")]
    )  # fmt: skip
    assert (asked.answers, asked.clarify) == (2, 0.5)
    assert asked.asks_back == pytest.approx(1 / 4)
    assert measure([user("book me in"), agent("Done.")]).clarify is None


def test_reactions() -> None:
    assert reaction(None, ["x"]) == "abandon"
    assert reaction("No, I still need it", ["help me with my account"]) == "pushback"
    assert reaction("help me with the account", ["help me with my account"]) == "rephrase"
    assert reaction("what time is it", ["help me with my account"]) == "pivot"
    assert reaction("Okay, never mind. Thanks", ["help me with my account"]) == "accept"
    assert reaction("ok, and what about A-2", ["help me with my account"]) == "pivot"


def test_one_session_hand_checked() -> None:
    found = measure(
        [
            user("Hi, can you help me?"),
            agent("Sure, which reference?"),
            user("A-12 and my email is me@x.org"),
            agent("Sorry, I cannot find it."),
            user("No!! I ALREADY gave it to you 😠"),
            agent("Let me look again."),
        ],
        key="thread t",
    )
    assert found.model_dump() == pytest.approx(
        SessionBehaviour(
            key="thread t",
            disclosure_first=0.0,
            asks_back=1 / 3,
            clarify=0.0,  # the one answer to "which reference?" gives it
            answers=1,
            ambiguous_start=True,
            error_events=1,
            pushback=1.0,
            rephrase=0.0,
            pivot=0.0,
            accept=0.0,
            abandon=0.0,
            user_turns=3,
            abandoned=False,
            words_per_turn=(5 + 8 + 7) / 3,  # me@x.org: three runs of letters
            question_rate=1 / 3,
            exclamation_rate=1 / 3,
            capitals=11 / 54,  # H, A, N, I, ALREADY of 54 letters
            emoji_rate=1 / 3,
            typos=0.0,
            formality=1 / 3,
            ascii_letters=1.0,
            opening_words=5,  # "Hi, can you help me?"
            opening_capitals=1 / 14,  # H of 14 letters
            opening_formality=1,  # hi
        ).model_dump()
    )


def test_a_session_ending_on_a_refusal_is_abandoned() -> None:
    found = measure([user("do X-1"), agent("I am unable to do that."), user("ok"), agent("error")])
    assert (found.abandon, found.accept, found.abandoned) == (0.5, 0.5, True)
    assert measure([user("hi")], goal_reached=False).abandoned
    assert measure([]).user_turns == 0


def test_style_measures() -> None:
    found = measure([user("i dont knw, thx"), user("Ça coûte combien?")])
    assert found.typos == pytest.approx(3 / 7)  # i, knw, thx
    assert found.ascii_letters == pytest.approx(23 / 25)  # Ç, û
    assert found.capitals == pytest.approx(1 / 25)


def test_profiles_recover_a_known_mix(tmp_path: Path) -> None:
    rng = random.Random(7)
    truth = {"A": (1 / 3, 0.8), "B": (1.0, 0.1)}  # disclosure_first, pushback
    accepts = 0.3  # of population B
    calls = [
        call
        for n in range(200)
        for call in session_calls(
            f"s{n}",
            gradual(rng, truth["A"][1])
            if n % 10 < 7
            else front_loading(rng, truth["B"][1], accepts),
        )
    ]
    export = tmp_path / "calls.jsonl"
    export.write_text("".join(json.dumps(c) + "\n" for c in calls))
    problems: list[Unreadable] = []
    measured = list(measure_calls(read_jsonl(export, Filters(), problems), problems))
    assert not problems and len(measured) == 200

    found = profiles(measured)
    assert len(found) == 2
    a, b = found
    assert (a.share, b.share) == (pytest.approx(0.7, abs=0.1), pytest.approx(0.3, abs=0.1))
    assert a.mean["disclosure_first"] == pytest.approx(truth["A"][0], abs=0.1)
    assert b.mean["disclosure_first"] == pytest.approx(truth["B"][0], abs=0.1)
    assert a.mean["pushback"] == pytest.approx(truth["A"][1], abs=0.15)
    assert b.mean["pushback"] == pytest.approx(truth["B"][1], abs=0.15)
    assert a.mean["rephrase"] == pytest.approx(0.2, abs=0.15)
    assert b.mean["accept"] == pytest.approx(accepts, abs=0.15)
    assert (a.name, b.name) == ("gradual, pushes back", "front-loading, pivots")
    assert sum(p.sessions for p in found) == 200 and {k for p in found for k in p.keys} == {
        f"thread s{n}" for n in range(200)
    }


def test_one_population_is_one_profile() -> None:
    rng = random.Random(3)
    sessions = [
        measure([user(f"about A-{rng.randint(1, 99)}"), agent("ok"), user("thanks")], f"s{n}")
        for n in range(30)
    ]
    [only] = profiles(sessions)
    assert only.share == 1.0 and only.sessions == 30
    assert profiles([]) == []

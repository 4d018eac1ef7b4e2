"""A persona's measured `behaviour` is executed: the scripted simulator discloses facts, reacts to
agent errors by the configured rates (seeded) and runs out of patience; an LLM simulator gets
the numbers and real examples in its prompt; a persona without `behaviour` plays as before."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.sim.suite import TaskCase, load_cases
from harness.sim.user import user_system_prompt
from harness.sim.user_behaviour import (
    ABANDON,
    ACCEPT,
    DONE,
    PIVOT,
    PUSH_BACK,
    BehaviourPlayer,
)
from harness.specs.load import load_agent, load_persona
from harness.specs.located import SpecError
from harness.specs.persona import Persona
from harness.specs.script import Script
from harness.testing.fake_server import FakeServer
from harness.transcript import EndReason, Message, Transcript
from tests.conftest import ROOT
from tests.sim.test_simulation import case, play

FACTS = {"account": "AC-77", "email": "sam@example.com", "city": "Lisbon", "plan": "basic"}
STOP = "###STOP###"


def asker(conversation: list[dict], tools: Any) -> dict:
    """Asks for one missing detail per turn, by name (in an order of its own); then is done."""
    said = " ".join(m["content"] for m in conversation if m["role"] == "user")
    for name in ("plan", "city", "email", "account"):
        if f"my {name} is" not in said.lower():
            return {"content": f"Thanks. What is your {name}?"}
    return {"content": "All set. Is there anything else?"}


def refuser(conversation: list[dict], tools: Any) -> dict:
    return {"content": "Sorry, I cannot do that."}


def suite(folder: Path, behaviour: dict | None, **persona: Any) -> TaskCase:
    """A task whose user holds the four FACTS, played by a scripted persona with `behaviour`."""
    played: dict[str, Any] = {"name": "measured", **persona}
    if behaviour is not None:
        played["behaviour"] = behaviour
    task = {
        "kind": "task",
        "id": "measured",
        "title": "A user who holds four facts",
        "level": 1,
        "domain": "support",
        "persona": played,
        "scenario": {
            "reason": "You want to move your subscription to a new plan.",
            "known_info": FACTS,
        },
        "start": {"state_file": str(ROOT / "tasks/support/data/desk.json")},
        "end": {"max_turns": 8},
        "checks": [{"kind": "text", "name": "answers", "contains": "set"}],
    }
    path = folder / "measured.yaml"
    path.write_text(yaml.safe_dump(task, sort_keys=False))
    [found] = load_cases([path])
    return found


def run(found: TaskCase, agent: str, folder: Path, seed: int = 0, max_turns: int = 8) -> Transcript:
    """An episode of `found` (limited to `max_turns`) against the python agent `agent` of this
    module, with `seed` (as its trial) for the user's draws."""
    (folder / "agent.yaml").write_text(
        f"kind: agent\nname: {agent}\nrunner: python\nentry: {__name__}:{agent}\n"
    )
    end = found.task.end.model_copy(update={"max_turns": max_turns})
    loaded = dataclasses.replace(found.loaded, spec=found.task.model_copy(update={"end": end}))
    return play(
        dataclasses.replace(found, loaded=loaded),
        load_agent(folder / "agent.yaml").spec,
        trial=seed,
    )


def user_says(transcript: Transcript) -> list[str]:
    return [m.content for m in transcript.messages if m.role == "user"]


def facts_in(text: str) -> list[str]:
    return [key for key, value in FACTS.items() if value in text]


def test_a_gradual_user_gives_one_fact_first_and_one_per_question(tmp_path: Path) -> None:
    transcript = run(suite(tmp_path, {"disclosure_first": 0.25}), "asker", tmp_path)
    said = user_says(transcript)
    assert said[0] == "I want to move my subscription to a new plan. My account is AC-77."
    # each question names the fact it wants, in an order other than the scenario's
    assert [facts_in(text) for text in said[1:4]] == [["plan"], ["city"], ["email"]]
    assert said[1:4] == ["My plan is basic.", "My city is Lisbon.", "My email is sam@example.com."]
    assert said[4:] == [DONE.format(stop=STOP)]
    assert transcript.end_reason == EndReason.USER_STOP and transcript.error is None


def test_a_front_loading_user_gives_every_fact_first(tmp_path: Path) -> None:
    transcript = run(suite(tmp_path, {"disclosure_first": 1.0}), "asker", tmp_path)
    said = user_says(transcript)
    assert facts_in(said[0]) == list(FACTS)
    assert said[1:] == [DONE.format(stop=STOP)]


def test_an_unnamed_question_gets_the_next_fact(tmp_path: Path) -> None:
    found = suite(tmp_path, {"disclosure_first": 0.5})
    transcript = run(found, "refuser", tmp_path, max_turns=1)
    assert facts_in(user_says(transcript)[0]) == ["account", "email"]
    player = BehaviourPlayer(found.persona, found.task.scenario, STOP, seed=0, trial=0)
    seen = [Message(role="assistant", content=user_says(transcript)[0])]
    question = Message(role="user", content="Could you give me one more detail?")
    assert player.reply([*seen, question]) == "My city is Lisbon."


def test_reactions_to_agent_errors_follow_the_rates_and_the_seed(tmp_path: Path) -> None:
    rates = {"pushback_rate": 0.5, "rephrase_rate": 0.1, "pivot_rate": 0.1, "abandon_rate": 0.2}
    found = suite(tmp_path, {"disclosure_first": 1.0, **rates})
    kinds = {
        PUSH_BACK: "pushback",
        PIVOT: "pivot",
        ABANDON.format(stop=STOP): "abandon",
        ACCEPT.format(stop=STOP): "accept",
    }
    seen = []
    for seed in range(200):
        opening, reaction = user_says(run(found, "refuser", tmp_path, seed, max_turns=2))[:2]
        rephrase = f"Let me put it another way: {opening}"  # the request and the facts it gave
        seen.append({**kinds, rephrase: "rephrase"}[reaction])
    expected = {**{k.removesuffix("_rate"): v for k, v in rates.items()}, "accept": 0.1}
    for kind, rate in expected.items():
        assert abs(seen.count(kind) / 200 - rate) <= 0.07, (kind, seen.count(kind))
    again = [user_says(run(found, "refuser", tmp_path, seed, max_turns=4)) for seed in (3, 3, 4)]
    assert again[0] == again[1]


def test_patience_of_the_behaviour_ends_the_episode(tmp_path: Path) -> None:
    found = suite(tmp_path, {"pushback_rate": 1.0, "patience": 3}, patience=8)
    transcript = run(found, "refuser", tmp_path)
    assert user_says(transcript)[1:3] == [PUSH_BACK, PUSH_BACK]
    assert transcript.end_detail == "the user gave up after 3 agent turns (patience)"
    assert len(user_says(transcript)) == 4 and transcript.turns == 3


def test_scripted_rules_with_conditions_come_before_the_behaviour(tmp_path: Path) -> None:
    rules = [
        {"when": {"agent_said": "(?i)cannot"}, "reply": f"A rule answers. {STOP}"},
        {"reply": "The fallback never speaks here."},
    ]
    found = suite(tmp_path, {"pushback_rate": 1.0}, scripted_turns=rules)
    assert user_says(run(found, "refuser", tmp_path))[1] == f"A rule answers. {STOP}"
    fallback = suite(tmp_path, {"disclosure_first": 1.0}, scripted_turns=rules[1:])
    assert user_says(run(fallback, "asker", tmp_path))[1] == "The fallback never speaks here."


BEHAVIOUR = {
    "disclosure_first": 0.25,
    "clarify_rate": 0.15,
    "pushback_rate": 0.6,
    "rephrase_rate": 0.1,
    "pivot_rate": 0.05,
    "abandon_rate": 0.15,
    "patience": 5,
    "words_per_turn": 12,
    "examples": ["need to change plan asap", "no. I said AC-77 already", "why do u need that", "x"],
}


def test_an_llm_user_gets_the_numbers_and_the_examples_over_the_wire(tmp_path: Path) -> None:
    user_model = Script.model_validate({"kind": "script", "rules": [{"reply": f"Bye {STOP}"}]})
    with FakeServer(user_model).running() as server:
        model = {"id": "openai/user-sim", "base_url": f"{server.url}/v1"}
        found = suite(tmp_path, BEHAVIOUR, model=model)
        run(found, "asker", tmp_path)
        system = server.requests[0]["messages"][0]["content"]
    rendered = [
        "In your first message give 1 of the 4 facts you know (account, email, city, plan).",
        "give exactly one more fact",
        "In 15% of your answers to the agent's questions, ask back",
        "push back and insist in 60% of cases",
        "in other words in 10%",
        "ask for something else in 5%",
        "leave without a solution in 15%",
        "accept the answer in the remaining 10%",
        "Write at most 5 messages",
        "after 5 replies",
        "about 12 words per message",
        "> need to change plan asap\n> no. I said AC-77 already\n> why do u need that",
    ]
    assert [line for line in rendered if line not in system] == []
    scenario, stops = found.task.scenario, found.task.end.stop_signals
    assert system == user_system_prompt(found.persona, scenario, stops, found.domain)
    assert "> x" not in system  # at most 3 examples
    assert not re.search(r"(?i)\bbe (impatient|patient|polite|rude)\b", system)


def test_a_front_loading_llm_user_is_told_to_give_everything(tmp_path: Path) -> None:
    persona = Persona.model_validate({"name": "p", "model": "openai/m", "behaviour": {}})
    found = suite(tmp_path, {})
    system = user_system_prompt(persona, found.task.scenario, [STOP])
    assert "In your first message give all 4 facts you know" in system
    assert "do not volunteer all at once" not in system


# Transcripts of bundled tasks and the LLM user's prompt, recorded before `behaviour` existed.
BEFORE = {
    "refund-by-email": "28a653a8cfd09b84",
    "impatient-gives-up": "ea98454a8cdf2968",
    "tracking-without-number": "e07a94bcf9e06ad6",
    "out-of-scope": "4adae6b816e0beb4",
}
PROMPT_BEFORE = "a51800b99df74f5a"


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.mark.parametrize("task_id", sorted(BEFORE))
def test_a_persona_without_behaviour_plays_exactly_as_before(task_id: str) -> None:
    found = case(task_id)
    assert found.persona.behaviour is None and "behaviour" not in found.persona.model_dump()
    transcript = play(found)
    messages = [m.model_dump(mode="json") for m in transcript.messages]
    assert digest(json.dumps(messages, sort_keys=True)) == BEFORE[task_id]
    explicit = found.persona.model_copy(update={"behaviour": None})
    again = play(dataclasses.replace(found, persona=explicit))
    assert again.messages == transcript.messages


def test_the_llm_prompt_without_behaviour_is_as_before() -> None:
    found = case("refund-by-email")
    persona = Persona(name="x", description="d", traits=["a"], style="s", model={"id": "openai/m"})
    prompt = user_system_prompt(persona, found.task.scenario, found.task.end.stop_signals)
    assert digest(prompt) == PROMPT_BEFORE


def test_rates_that_sum_over_one_are_a_located_error(tmp_path: Path) -> None:
    path = tmp_path / "greedy.yaml"
    path.write_text(
        "kind: persona\nname: greedy\nbehaviour:\n  pushback_rate: 0.8\n  abandon_rate: 0.4\n"
    )
    with pytest.raises(SpecError) as error:
        load_persona(path)
    message = str(error.value)
    assert "greedy.yaml:3:1: behaviour: pushback_rate + rephrase_rate" in message
    assert "sum to at most 1" in message
    assert "\n" not in message.strip()
    path.write_text("kind: persona\nname: measured\nbehaviour:\n  disclosure_first: 0.5\n")
    assert load_persona(path).spec.behaviour.disclosure_first == 0.5  # needs no scripted_turns


def test_the_simulated_users_page_example_is_a_valid_persona() -> None:
    page = (ROOT / "docs" / "guide" / "simulated-users.md").read_text()
    block = re.search(r"```yaml\n(kind: persona\nname: gradual-pusher\n.*?)```", page, re.S)
    assert block is not None
    persona = Persona.model_validate(yaml.safe_load(block.group(1)))
    assert persona.behaviour is not None and persona.behaviour.accept_rate == pytest.approx(0.1)

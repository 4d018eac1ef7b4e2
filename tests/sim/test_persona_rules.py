"""Scripted persona rules say what they mean: `agent_said`, `agent_history` and `i_said` search
what their names say, `turn` counts as documented, and `harness validate` warns about rules that
never fire (and about `history`/`user`, which search the agent's words)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import yaml

from harness.models import ModelRuntime
from harness.sim.suite import load_cases
from harness.sim.user import GREETING, UserSimulator
from harness.specs.located import display
from harness.specs.persona import Persona
from harness.specs.script import Script, When
from harness.specs.task import Scenario
from harness.transcript import EndReason, Message
from tests.conftest import ROOT
from tests.sim.test_simulation import play

PUSH_BACK = "That is not good enough, please reconsider."


def stubborn(already_pushed_back: dict[str, str]) -> list[dict[str, Any]]:
    """'Push back once, then give up', the first rule saying how it knows it pushed back."""
    return [
        {"when": already_pushed_back, "reply": "Fine, forget it. ###STOP###"},
        {"when": {"agent_said": "(?i)can only help"}, "reply": PUSH_BACK},
        {"reply": "Hello?"},
    ]


def task_file(folder: Path, rules: list[dict[str, Any]], first_message: str | None) -> Path:
    """A support task whose inline scripted persona plays `rules` (patience 5)."""
    task = {
        "kind": "task",
        "id": "push-back",
        "title": "A request the desk cannot handle",
        "level": 1,
        "domain": "support",
        "persona": {"name": "stubborn", "patience": 5, "scripted_turns": rules},
        "scenario": {"reason": "You want to book a flight."},
        "start": {
            "state_file": str(ROOT / "tasks/support/data/desk.json"),
            "first_message": first_message,
        },
        "checks": [{"kind": "text", "name": "declines", "contains": "only help"}],
    }
    path = folder / "push-back.yaml"
    path.write_text(yaml.safe_dump(task, sort_keys=False))
    return path


def user_texts(rules: list[dict[str, Any]], folder: Path) -> tuple[list[str], EndReason]:
    """The persona's messages in an episode against the scripted support agent, which answers
    a flight booking (and anything else off its topics) with 'I can only help with orders...'."""
    [case] = load_cases([task_file(folder, rules, "Can you book me a flight?")])
    transcript = play(case)
    return [m.content for m in transcript.messages if m.role == "user"], transcript.end_reason


def test_a_persona_that_pushes_back_once_with_i_said_pushes_back_exactly_once(
    tmp_path: Path,
) -> None:
    said, end = user_texts(stubborn({"i_said": "(?i)reconsider"}), tmp_path)
    assert said == ["Can you book me a flight?", PUSH_BACK, "Fine, forget it. ###STOP###"]
    assert end == EndReason.USER_STOP


def test_history_still_searches_the_agents_messages_so_the_same_persona_never_stops(
    tmp_path: Path,
) -> None:
    said, end = user_texts(stubborn({"history": "(?i)reconsider"}), tmp_path)
    assert said.count(PUSH_BACK) == 4, "the agent never says 'reconsider': patience runs out"
    assert said[-1].endswith("I give up. ###STOP###") and end == EndReason.USER_STOP


def simulated_user(*rules: dict[str, Any]) -> UserSimulator:
    persona = Persona.model_validate({"name": "p", "scripted_turns": list(rules)})
    return UserSimulator(persona, Scenario(reason="testing"), ["###STOP###"], ModelRuntime())


def replies(user: UserSimulator, *texts: tuple[str, str]) -> str:
    """The persona's next message after a conversation of (role, text) from the agent's side."""
    messages = [Message(role=role, content=text) for role, text in texts]  # type: ignore[arg-type]
    agent_turns = sum(role == "assistant" for role, _ in texts)
    return asyncio.run(user.reply(messages, agent_turns)).content


# The agent asked for the order number two turns ago, not in its last message.
ASKED_EARLIER = (
    ("user", "My parcel is late."),
    ("assistant", "Could you give me your order number?"),
    ("user", "It is O-1002."),
    ("assistant", "Order O-1002 has shipped. Anything else?"),
)


def test_agent_said_reads_the_last_message_and_agent_history_every_agent_message() -> None:
    user = simulated_user(
        {"when": {"agent_said": "(order number)"}, "reply": "said: {agent_said.1}"},
        {"when": {"agent_history": "(order number)"}, "reply": "earlier: {agent_history.1}"},
        {"reply": "neither"},
    )
    assert replies(user, *ASKED_EARLIER) == "earlier: order number"
    assert replies(user, *ASKED_EARLIER[:2]) == "said: order number"


def test_i_said_reads_the_personas_own_messages_with_the_tasks_first_message() -> None:
    user = simulated_user(
        {"when": {"i_said": r"(O-\d+)"}, "reply": "I gave you {i_said.1} already."},
        {"when": {"i_said": "(?i)parcel"}, "reply": "As I said, my parcel."},
        {"reply": "neither"},
    )
    assert replies(user, *ASKED_EARLIER) == "I gave you O-1002 already."
    assert replies(user, *ASKED_EARLIER[:2]) == "As I said, my parcel.", "first_message counts"
    assert replies(user, ("assistant", "order number? O-1002?")) == "neither", "not the agent's"


def test_turn_counts_the_tasks_first_message_as_the_personas_turn_1() -> None:
    user = simulated_user(
        {"when": {"turn": 1}, "reply": "turn 1"},
        {"when": {"turn": 2}, "reply": "turn 2"},
        {"reply": "later"},
    )
    opened_by_task = ASKED_EARLIER[:2]
    assert replies(user, *opened_by_task) == "turn 2"
    assert replies(user, *ASKED_EARLIER) == "later"
    assert replies(user, ("assistant", GREETING)) == "turn 1", "the persona opens: turn 1"


def test_an_agent_scripts_turn_counts_its_own_messages() -> None:
    from harness.models.scripted import ScriptedModel

    agent = ScriptedModel(
        Script.model_validate(
            {
                "kind": "script",
                "rules": [{"when": {"turn": n}, "reply": f"turn {n}"} for n in (1, 2)],
            }
        )
    )
    first = [Message(role="user", content="hi")]
    assert agent.reply(first).content == "turn 1"
    greeted = [Message(role="assistant", content=GREETING), *first]
    assert agent.reply(greeted).content == "turn 2", "the harness's greeting is the agent's turn 1"


def validate(cli, path: Path) -> tuple[int, list[str], list[str]]:
    result = cli("validate", path)
    return result.exit_code, result.stdout.splitlines(), result.stderr.splitlines()


def test_validate_warns_about_a_rule_after_the_fallback_and_still_exits_0(
    cli, tmp_path: Path
) -> None:
    path = tmp_path / "stubborn.yaml"
    path.write_text(
        "kind: persona\n"
        "name: stubborn\n"
        "scripted_turns:\n"
        "  - when: {agent_said: '(?i)can only help'}\n"
        "    reply: Please reconsider.\n"
        "  - reply: Hello?\n"
        "  - when: {i_said: '(?i)reconsider'}\n"
        "    reply: Fine, forget it. ###STOP###\n"
    )
    code, out, err = validate(cli, path)
    assert code == 0
    assert out == [f"ok  persona  {display(path)}", "1 valid, 0 invalid"]
    assert err == [
        f"{display(path)}:7:5: warning: scripted_turns[2]: never fires: scripted_turns[1] above "
        "answers every message it would"
    ]


def test_validate_warns_about_turn_1_in_a_task_that_gives_the_first_message(
    cli, tmp_path: Path
) -> None:
    rules = [{"when": {"turn": 1}, "reply": "First!"}, {"reply": "Hello?"}]
    path = task_file(tmp_path, rules, first_message="Can you book me a flight?")
    code, _, err = validate(cli, path)
    assert code == 0
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if "turn: 1" in text)
    column = path.read_text().splitlines()[line - 1].index("turn") + 1
    assert err[0] == (
        f"{display(path)}:{line}:{column}: warning: persona.scripted_turns[0].when.turn: never "
        "fires: the task's opening user messages (`start.first_message`, `start.history`) are "
        "the persona's turn 1, so its first scripted reply is turn 2"
    )
    # Without a first message the persona opens at turn 1: nothing to warn about.
    code, _, err = validate(cli, task_file(tmp_path, rules, first_message=None))
    assert code == 0 and err == []


def test_a_persona_file_with_turn_1_is_warned_about_at_the_task_that_opens_first(
    cli, tmp_path: Path
) -> None:
    (tmp_path / "personas").mkdir()
    (tmp_path / "personas" / "eager.yaml").write_text(
        "kind: persona\nname: eager\nmodel: scripted\nscripted_turns:\n"
        "  - when: {turn: 1}\n    reply: First!\n  - reply: Hello? ###STOP###\n"
    )
    task = yaml.safe_load((ROOT / "tasks" / "support" / "order-status.yaml").read_text())
    task["persona"] = "eager"
    task["start"]["state_file"] = str(ROOT / "tasks" / "support" / "data" / "desk.json")
    assert task["start"].get("first_message")
    (tmp_path / "tasks").mkdir()
    path = tmp_path / "tasks" / "eager-task.yaml"
    path.write_text(yaml.safe_dump(task, sort_keys=False))
    code, _, err = validate(cli, path)
    assert code == 0
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if "persona:" in text)
    assert [e for e in err if "turn" in e] == [
        f"{display(path)}:{line}:1: warning: persona.scripted_turns[0].when.turn: never "
        "fires: the task's opening user messages (`start.first_message`, `start.history`) are "
        "the persona's turn 1, so its first scripted reply is turn 2"
    ]


def test_validate_suggests_the_explicit_names_for_history_and_user(cli, tmp_path: Path) -> None:
    path = tmp_path / "vague.yaml"
    path.write_text(
        "kind: persona\n"
        "name: vague\n"
        "scripted_turns:\n"
        "  - when: {history: push back}\n"
        "    reply: Fine.\n"
        "  - when: {user: sorry}\n"
        "    reply: Please reconsider.\n"
        "  - reply: Hello?\n"
    )
    code, _, err = validate(cli, path)
    assert code == 0
    assert err[:2] == [
        f"{display(path)}:4:12: warning: scripted_turns[0].when.history: `history` searches the "
        "agent's messages, not the persona's own: write `agent_history` to say so, or `i_said` "
        "for what the persona said",
        f"{display(path)}:6:12: warning: scripted_turns[1].when.user: `user` searches the agent's "
        "last message (the simulated user's model sees the agent as `user`): write `agent_said` "
        "to say so",
    ]


def test_validate_warns_about_tool_rules_and_refuses_templates_that_never_fire(
    cli, tmp_path: Path
) -> None:
    """A rule on tool results is a warning (a persona never sees them); a template naming a
    value its rule never has would silently never fire: that is bad input (issue 41)."""
    path = tmp_path / "broken.yaml"
    path.write_text(
        "kind: persona\n"
        "name: broken\n"
        "scripted_turns:\n"
        "  - when: {tool: get_order}\n"
        "    reply: Thanks.\n"
        "  - reply: Hello?\n"
    )
    code, _, err = validate(cli, path)
    assert code == 0
    assert [line.split(": warning: ", 1)[1] for line in err] == [
        "scripted_turns[0].when: never fires: `tool`, `result` and `error` answer tool results, "
        "which a simulated user never sees",
    ]
    path.write_text(
        "kind: persona\n"
        "name: broken\n"
        "scripted_turns:\n"
        "  - when: {agent_said: 'order (O-\\d+)'}\n"
        "    reply: '{agent_said.2} and {i_said.1}'\n"
        "  - reply: Hello?\n"
    )
    code, _, err = validate(cli, path)
    assert code == 2
    assert err == [
        f"{display(path)}:5:5: scripted_turns[0].reply: never fires: `{{agent_said.2}}`: the "
        "`agent_said` regex has no group '2'",
        f"{display(path)}:5:5: scripted_turns[0].reply: never fires: `{{i_said.1}}` reads "
        "`i_said`, which the rule does not give",
        "0 valid, 1 invalid",
    ]


def test_a_script_warns_about_conversational_rules_after_its_fallback_only(
    cli, tmp_path: Path
) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(
        "kind: script\n"
        "rules:\n"
        "  - reply: I can only help with orders.\n"
        "  - when: {user: refund}\n"
        "    reply: Refund?\n"
        "  - when: {tool: get_order}\n"
        "    reply: 'Order {result.order_id}.'\n"
    )
    code, _, err = validate(cli, path)
    assert code == 0
    assert err == [
        f"{display(path)}:4:5: warning: rules[1]: never fires: rules[0] above answers every "
        "message it would"
    ]


def test_an_invalid_regex_in_a_new_condition_is_an_error(cli, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "kind: persona\nname: bad\nscripted_turns:\n  - when: {i_said: '(unclosed'}\n    reply: x\n"
    )
    code, _, err = validate(cli, path)
    assert code == 2
    assert err[0] == (
        f"{display(path)}:4:12: scripted_turns[0].when.i_said: invalid regex: missing ), "
        "unterminated subpattern at position 0"
    )


def test_the_bundled_files_validate_without_warnings(cli) -> None:
    result = cli("validate", "tasks", "personas", "agents/scripts")
    assert result.exit_code == 0
    assert "warning:" not in result.stderr


def test_the_persona_schema_documents_what_each_condition_searches(cli) -> None:
    schema = json.loads(cli("schema", "persona").stdout)
    when = schema["$defs"]["PersonaWhen"]["properties"]
    assert "the agent's last message" in when["agent_said"]["description"]
    assert "every message the agent wrote" in when["agent_history"]["description"]
    assert "this persona's own earlier messages" in when["i_said"]["description"]
    assert "never the persona's own" in when["history"]["description"]
    assert "that message is turn 1" in when["turn"]["description"]
    script = json.loads(cli("schema", "script").stdout)
    assert (
        "greeting the persona answers is the agent's turn 1"
        in (script["$defs"]["When"]["properties"]["turn"]["description"])
    )


def test_unused_new_conditions_leave_a_personas_dump_and_so_task_hashes_as_they_were() -> None:
    persona = Persona.model_validate(
        {"name": "p", "scripted_turns": [{"when": {"matches": "x"}, "reply": "y"}]}
    )
    dumped = persona.model_dump(mode="json")["scripted_turns"][0]["when"]
    assert set(dumped) == set(When.model_fields), "the gate compares task content hashes"
    used = Persona.model_validate(
        {"name": "p", "scripted_turns": [{"when": {"i_said": "x"}, "reply": "y"}]}
    )
    assert used.model_dump(mode="json")["scripted_turns"][0]["when"]["i_said"] == "x"
    assert Persona.model_validate(persona.model_dump(mode="json")) == persona

"""A domain's `State` model is what the start state is: fields a task leaves out hold the model's
defaults for the tools, for state checks and in the task set's content hash (a task validated
against the model must not crash a tool reading a defaulted field)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from harness.domains import Environment, tool
from harness.domains.replay import ReplayState
from harness.grading.checks import CheckContext
from harness.grading.normative import grade
from harness.sim.suite import TaskCase, load_cases
from harness.sim.taskset import content_hash
from harness.specs.load import load_agent
from harness.transcript import EndReason, Transcript
from tests.conftest import play_case


class Booking(BaseModel):
    """A flight booking; only the passenger must be written."""

    model_config = ConfigDict(extra="forbid")

    passenger: str
    cabin: Literal["economy", "business"] = "economy"
    bags: int = 0


class Airline(Environment):
    """Tools that read fields a task may leave to their defaults."""

    domain = "test-airline"
    State = Booking

    @tool
    def cabin_class(self) -> str:
        """The booking's cabin."""
        return self.state["cabin"]

    @tool
    def add_bag(self) -> int:
        """Add a checked bag; the number of bags."""
        self.state["bags"] += 1
        return self.state["bags"]


class Notes(Environment):
    """A domain without a `State` model: its start state is the task's data as written."""

    domain = "test-notes"


STATE_CHECK = "  - {kind: state, expect: {passenger: Ada, cabin: economy, bags: 1}}\n"


def write_task(folder: Path, state: str, domain: str = f"{__name__}:Airline") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "task.yaml"
    path.write_text(
        f"kind: task\nid: bag\ntitle: add a bag\nlevel: 1\ndomain: {domain}\n"
        "persona: {name: p, model: scripted, scripted_turns: [{reply: 'thanks ###STOP###'}]}\n"
        "scenario: {reason: add a bag}\n"
        f"start: {{first_message: 'Add a bag please', state: {state}}}\n"
        f"checks:\n{STATE_CHECK}"
    )
    return path


def play(case: TaskCase, tmp_path: Path) -> Transcript:
    (tmp_path / "agent.py").write_text(
        "def respond(conversation, tools):\n"
        "    cabin = tools.call('cabin_class')\n"
        "    bags = tools.call('add_bag')\n"
        "    return f'cabin {cabin}, bags {bags}'\n"
    )
    agent_file = tmp_path / "agent.yaml"
    agent_file.write_text("kind: agent\nname: mine\nrunner: python\nentry: agent.py:respond\n")
    variant = load_agent(agent_file).spec
    return play_case(case, variant)


def test_tools_and_state_checks_see_the_defaults_a_task_leaves_out(tmp_path: Path) -> None:
    [case] = load_cases([write_task(tmp_path / "task", "{passenger: Ada}")])
    assert case.state == {"passenger": "Ada", "cabin": "economy", "bags": 0}
    transcript = play(case, tmp_path)
    assert transcript.end_reason == EndReason.USER_STOP, transcript.error
    assert transcript.assistant_texts()[0] == "cabin economy, bags 1"
    assert transcript.final_state == {"passenger": "Ada", "cabin": "economy", "bags": 1}
    verdict = asyncio.run(grade(transcript, CheckContext(case.task)))
    assert verdict.outcome == "pass", verdict


def test_a_default_written_or_left_out_is_the_same_task_set(tmp_path: Path) -> None:
    left_out = load_cases([write_task(tmp_path / "short", "{passenger: Ada}")])
    written = load_cases(
        [write_task(tmp_path / "long", "{passenger: Ada, cabin: economy, bags: 0}")]
    )
    assert left_out[0].state == written[0].state
    assert content_hash(left_out) == content_hash(written)
    changed = load_cases([write_task(tmp_path / "other", "{passenger: Ada, cabin: business}")])
    assert content_hash(changed) != content_hash(left_out)


def test_the_start_state_from_a_file_gets_the_defaults_too(tmp_path: Path) -> None:
    (tmp_path / "booking.json").write_text('{"passenger": "Ada"}')
    path = write_task(tmp_path, "{bags: 2}")
    path.write_text(path.read_text().replace("state: {bags: 2}", "state_file: booking.json"))
    [case] = load_cases([path])
    assert case.state == {"passenger": "Ada", "cabin": "economy", "bags": 0}


def test_a_domain_without_a_state_model_keeps_its_data_as_written(tmp_path: Path) -> None:
    path = write_task(tmp_path, "{note: hi, extra: [1, 2]}", f"{__name__}:Notes")
    path.write_text(path.read_text().replace(STATE_CHECK, "  - {kind: text, contains: hi}\n"))
    [case] = load_cases([path])
    assert case.state == {"note": "hi", "extra": [1, 2]}


def test_a_replay_start_state_dump_validates_again(tmp_path: Path) -> None:
    path = tmp_path / "replay.yaml"
    path.write_text(
        "kind: task\nid: r\ntitle: replay\nlevel: 1\ndomain: replay\n"
        "persona: {name: p, model: scripted, scripted_turns: [{reply: 'thanks ###STOP###'}]}\n"
        "scenario: {reason: order status}\n"
        "start:\n  state:\n"
        "    tools: [{name: lookup, parameters: {type: object}}]\n"
        "    recordings: [{tool: lookup, arguments: {id: 1, note: x}, result: found}]\n"
        "    matching: {lookup: {keys: [id]}}\n"
        "    fallback: {'*': {result: none}}\n"
        "checks:\n  - {kind: tool_called, tool: lookup}\n"
    )
    [case] = load_cases([path])
    assert ReplayState.model_validate(case.state).model_dump(mode="json") == case.state
    env = case.domain(case.state)
    assert asyncio.run(env.call("lookup", {"id": 1, "note": "other words"})).content == '"found"'
    assert asyncio.run(env.call("lookup", {"id": 2})).content == '"none"'


def test_the_cases_task_carries_its_resolved_start_state(tmp_path: Path) -> None:
    """The task's own `start` (which its content hash covers) says the resolved state."""
    [case] = load_cases([write_task(tmp_path, "{passenger: Ada}")])
    assert case.task.start.state == case.state
    assert case.task.start.state_file is None and case.task.start.state_db is None

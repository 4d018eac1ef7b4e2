"""The episode loop: every end reason, every error side, and what the simulated user sees."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from harness.domains import Environment
from harness.models import Completion, CompletionParams, create_model
from harness.models.scripted import ScriptedModel
from harness.sim.agent import LLMAgent
from harness.sim.episode import EpisodeSpec, run_episode
from harness.sim.suite import TaskCase, load_cases
from harness.sim.user import UserSimulator
from harness.specs.load import load_agent
from harness.specs.overrides import Override
from harness.specs.persona import Persona
from harness.specs.script import Script
from harness.transcript import EndReason, Message, Side, ToolSpec, Transcript
from tests.conftest import ROOT, SCRIPTED


def case(task_id: str, *overrides: str) -> TaskCase:
    [found] = load_cases(
        [ROOT / f"tasks/support/{task_id}.yaml"], overrides=[Override.parse(o) for o in overrides]
    )
    return found


def agent(model: Any = None) -> LLMAgent:
    scripted = Override.parse(SCRIPTED).scoped()[1]
    variant = load_agent(ROOT / "agents/support-baseline.yaml", [scripted]).spec
    return LLMAgent(variant, model or create_model(variant.model))


def play(task: TaskCase, llm: LLMAgent | None = None, persona: Persona | None = None) -> Transcript:
    spec = EpisodeSpec(
        task=task.task,
        persona=persona or task.persona,
        agent=llm or agent(),
        variant_hash="h",
        initial_state=task.state,
    )
    return asyncio.run(run_episode(spec))


def persona(*rules: dict) -> Persona:
    return Persona(name="p", model="scripted", scripted_turns=list(rules))


@pytest.mark.parametrize(
    ("task_id", "reason", "turns"),
    [
        ("order-status", EndReason.USER_STOP, 1),
        ("out-of-scope", EndReason.OUT_OF_SCOPE, 1),
        ("dispute-handoff", EndReason.AGENT_HANDOFF, 1),
    ],
)
def test_bundled_end_reasons(task_id: str, reason: EndReason, turns: int) -> None:
    transcript = play(case(task_id))
    assert (transcript.end_reason, transcript.turns, transcript.error) == (reason, turns, None)


def test_transfer_signal() -> None:
    transcript = play(
        case("order-status"), persona=persona({"reply": "human please ###TRANSFER###"})
    )
    assert transcript.end_reason == EndReason.TRANSFER


def test_max_turns_stops_before_asking_the_user_again() -> None:
    transcript = play(case("address-change", "end.max_turns=1"))
    assert (transcript.end_reason, transcript.turns) == (EndReason.MAX_TURNS, 1)
    assert transcript.messages[-1].role == "assistant"


def test_persona_opens_when_the_task_gives_no_first_message() -> None:
    task = case("order-status", "start.first_message=null")
    opener = persona(
        {"when": {"matches": "help you"}, "reply": "Where is order {known.order_id}?"},
        {"reply": "bye ###STOP###"},
    )
    transcript = play(task, persona=opener)
    assert [m.content for m in transcript.messages[:2]] == [
        "Hi! How can I help you today?",
        "Where is order O-1002?",
    ]
    assert transcript.end_reason == EndReason.USER_STOP


def test_agent_model_failure_is_an_agent_model_error_with_the_partial_transcript() -> None:
    # the provider behind an llm agent failed: missing evidence, not the agent's failure
    transcript = play(
        case("order-status"),
        persona=persona({"reply": "what about a haiku?"}),
        llm=agent(ScriptedModel(script_of({"when": {"user": "O-"}, "reply": "ok"}))),
    )
    assert transcript.end_reason == EndReason.ERROR
    assert transcript.error.side == Side.AGENT_MODEL
    assert transcript.error.message.startswith("the agent's model provider failed: ")
    assert "no rule matches the last user message 'what about a haiku?'" in transcript.error.message
    assert transcript.turns == 1 and transcript.messages[-1].content == "what about a haiku?"


def test_user_simulator_failure_is_a_user_simulator_error() -> None:
    transcript = play(
        case("order-status"), persona=persona({"when": {"matches": "zzz"}, "reply": "x"})
    )
    assert transcript.end_reason == EndReason.ERROR
    assert transcript.error.side == Side.USER_SIMULATOR


class SlowModel:
    name = "slow"

    async def complete(
        self, messages: list[Message], tools: list[ToolSpec], params: CompletionParams
    ) -> Completion:
        await asyncio.sleep(10)
        raise AssertionError("unreachable")


def test_wall_time_limit_ends_the_episode_as_timeout() -> None:
    transcript = play(case("order-status", "end.max_seconds=0.2"), llm=agent(SlowModel()))
    assert transcript.end_reason == EndReason.TIMEOUT and transcript.error is None
    assert transcript.duration_s < 5


class BrokenDesk(Environment):
    domain = "broken-desk"

    def __init__(self, state: dict[str, Any]):
        raise OSError("snapshot unavailable")


def test_environment_failure_is_an_environment_error() -> None:
    task = case("order-status")
    task.task.domain = "tests.sim.test_episode:BrokenDesk"
    transcript = play(task)
    assert transcript.error.side == Side.ENVIRONMENT
    assert transcript.error.message == "OSError: snapshot unavailable"


class RecordingModel:
    """Wraps the persona's model and keeps every prompt it was given."""

    def __init__(self, inner: ScriptedModel):
        self.inner, self.name, self.prompts = inner, inner.name, []

    async def complete(self, messages, tools, params):
        self.prompts.append((list(messages), list(tools)))
        return await self.inner.complete(messages, tools, params)


def test_simulated_user_never_sees_agent_only_content(monkeypatch) -> None:
    recorders: list[RecordingModel] = []

    class Recording(UserSimulator):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.model = RecordingModel(self.model)
            recorders.append(self.model)

    monkeypatch.setattr("harness.sim.episode.UserSimulator", Recording)
    transcript = play(case("refund-by-email"))
    assert transcript.end_reason == EndReason.USER_STOP
    [recorder] = recorders
    agent_prompt = agent().system_prompt
    secrets = {m.content for m in transcript.messages if m.role == "tool"}
    for prompt, tools in recorder.prompts:
        assert tools == []
        assert {m.role for m in prompt} <= {"system", "user", "assistant"}
        assert all(not m.tool_calls for m in prompt)
        text = "\n".join(m.content for m in prompt)
        assert agent_prompt not in text and "refund window" not in text.lower()
        assert not any(secret in text for secret in secrets)
        assert "C-102" not in text  # a customer id only tool results carry
    assert len(recorder.prompts) == transcript.turns


def script_of(*rules: dict) -> Script:
    return Script.model_validate({"kind": "script", "rules": list(rules)})

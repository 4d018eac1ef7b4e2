"""The simulator in depth: LLM personas over a real wire protocol, character breaks, patience,
python and http agents, async tools, snapshots of production data."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from harness.domains import Environment, get_domain, tool
from harness.models import CallPolicy, ModelRuntime
from harness.sim.agent import load_entry
from harness.sim.env import read_snapshot, write_snapshot
from harness.sim.suite import TaskCase, load_cases
from harness.sim.tool_handle import ToolHandle
from harness.sim.user import NO_REPLY, user_system_prompt
from harness.specs.load import load_agent
from harness.specs.located import SpecError
from harness.specs.overrides import Override
from harness.specs.references import read_json
from harness.specs.script import Script
from harness.testing.fake_server import FakeServer
from harness.transcript import EndReason, Message, Side, Transcript
from tests.conftest import ROOT, SCRIPTED, play_case

FAST = CallPolicy(timeout_s=5, max_retries=1, backoff_base_s=0.01)


def case(task_id: str, *overrides: str, personas: tuple[str, ...] = ()) -> TaskCase:
    [found] = load_cases(
        [ROOT / f"tasks/support/{task_id}.yaml"],
        overrides=[Override.parse(o) for o in overrides],
        persona_overrides=[Override.parse(o) for o in personas],
    )
    return found


def variant(name: str = "support-baseline", *overrides: str):
    return load_agent(ROOT / f"agents/{name}.yaml", [Override.parse(o) for o in overrides]).spec


def play(
    task: TaskCase, agent_variant=None, runtime: ModelRuntime | None = None, trial: int = 0
) -> Transcript:
    agent_variant = agent_variant or variant("support-baseline", SCRIPTED.removeprefix("agent."))
    return play_case(task, agent_variant, runtime or ModelRuntime(policy=FAST), trial)


def script(*rules: dict) -> Script:
    return Script.model_validate({"kind": "script", "rules": list(rules)})


# ------------------------------------------------------------------ LLM personas


def test_llm_persona_gets_its_prompt_over_the_wire_and_plays_the_user() -> None:
    user_model = script(
        {
            "when": {"matches": "tracking number is (\\S+)\\."},
            "reply": "Thanks, got it. ###STOP###",
        },
        {"reply": "Where is my order O-1002?"},
    )
    with FakeServer(user_model).running() as server:
        task = case(
            "order-status",
            "start.first_message=null",
            personas=(f"model={{id: openai/user-sim, base_url: {server.url}/v1}}",),
        )
        transcript = play(task)
        first = server.requests[0]
    assert transcript.end_reason == EndReason.USER_STOP and transcript.error is None
    assert [m.content for m in transcript.messages if m.role == "user"] == [
        "Where is my order O-1002?",
        "Thanks, got it. ###STOP###",
    ]
    system = first["messages"][0]["content"]
    assert system == user_system_prompt(
        task.persona, task.task.scenario, task.task.end.stop_signals, task.domain
    )
    for expected in (
        "You ordered a book",
        "order_id: O-1002",
        "the carrier's delivery date",
        "Full sentences",
        "###STOP###",
    ):
        assert expected in system
    assert first["messages"][1:] == [{"role": "user", "content": "Hi! How can I help you today?"}]
    assert transcript.user_usage.calls == 2 and transcript.user_usage.input_tokens > 0


def test_a_character_break_is_retried_once_with_a_correction() -> None:
    user_model = script(
        {"when": {"system": "was invalid"}, "reply": "Fine. Where is order O-1002? ###STOP###"},
        {"reply": "Hello! How can I help you today?"},
    )
    with FakeServer(user_model).running() as server:
        task = case(
            "order-status",
            "start.first_message=null",
            personas=(f"model={{id: openai/user-sim, base_url: {server.url}/v1}}",),
        )
        transcript = play(task)
        assert server.snapshot()["requests"] == 2
    assert transcript.error is None
    assert transcript.messages[-1].content == "Fine. Where is order O-1002? ###STOP###"


def test_a_user_model_that_keeps_breaking_character_is_a_user_simulator_error() -> None:
    with FakeServer(
        script({"reply": "Assistant: Is there anything else I can help with?"})
    ).running() as server:
        task = case(
            "order-status", personas=(f"model={{id: anthropic/user-sim, base_url: {server.url}}}",)
        )
        transcript = play(task)
    assert transcript.end_reason == EndReason.ERROR
    assert transcript.error.side == Side.USER_SIMULATOR
    assert "the reply speaks as the agent, twice" in transcript.error.message
    assert transcript.turns == 1, "the agent's turn happened and is kept"


def test_a_persona_model_that_cannot_be_set_up_is_a_harness_error(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    transcript = play(case("order-status", personas=("model=openai/gpt-4.1-mini",)))
    assert transcript.error.side == Side.HARNESS
    assert "set OPENAI_API_KEY" in transcript.error.message


def test_patience_runs_out() -> None:
    transcript = play(case("impatient-gives-up"))
    assert transcript.end_reason == EndReason.USER_STOP
    assert transcript.end_detail == "the user gave up after 2 agent turns (patience)"
    assert transcript.messages[-1].content.endswith("I give up. ###STOP###")


# ------------------------------------------------------------------ agents under test


def test_python_agent_runs_the_shipped_code_with_recorded_tool_calls() -> None:
    transcript = play(case("refund-by-email"), variant("support-python"))
    assert transcript.error is None and transcript.end_reason == EndReason.USER_STOP
    assert [c.name for c in transcript.tool_calls()] == [
        "find_customer",
        "list_orders",
        "get_order",
        "issue_refund",
    ]
    assert transcript.final_state["orders"]["O-1006"]["status"] == "refunded"
    assert "I've refunded $34.99 for order O-1006." in transcript.assistant_texts()[-1]


async def _async_agent(conversation: list[dict], tools: ToolHandle) -> dict:
    order = await tools.acall("get_order", order_id="O-1002")
    return {"content": f"{order['order_id']}: {order['status']}. Is there anything else?"}


def test_async_python_agent_and_empty_replies(tmp_path: Path) -> None:
    (tmp_path / "quiet.py").write_text("def respond(conversation, tools):\n    return ''\n")
    (tmp_path / "quiet.yaml").write_text(
        "kind: agent\nname: quiet\nrunner: python\nentry: quiet.py:respond\n"
    )
    quiet = load_agent(tmp_path / "quiet.yaml").spec
    persona_rules = [
        {"when": {"matches": "did not reply"}, "reply": "Hello? ###STOP###"},
        {"reply": "?"},
    ]
    task = case("order-status", personas=(f"scripted_turns={persona_rules}",))
    transcript = play(task, quiet)
    assert [m.content for m in transcript.messages[-2:]] == ["", "Hello? ###STOP###"]
    assert "did not reply" in NO_REPLY

    async_variant = quiet.model_copy(update={"entry": f"{__name__}:_async_agent"})
    transcript = play(case("order-status"), async_variant)
    assert transcript.assistant_texts()[0] == "O-1002: shipped. Is there anything else?"
    assert [c.name for c in transcript.tool_calls()] == ["get_order"]


def test_the_same_task_against_a_python_agent_and_an_http_agent_service() -> None:
    respond = load_entry(str(ROOT / "agents/support_bot.py") + ":respond")
    python_run = play(case("order-status"), variant("support-python"))
    server_side = get_domain("support")(read_json(ROOT / "tasks/support/data/desk.json"))

    async def service(messages: list[Message]) -> Message:
        conversation = [
            {"role": m.role, "content": m.content}
            for m in messages
            if m.role in ("user", "assistant")
        ]
        tools = ToolHandle(variant("support-python"), server_side, [], asyncio.get_running_loop())
        reply = await asyncio.to_thread(respond, conversation, tools)
        return Message(role="assistant", content=reply)

    with FakeServer(responder=service).running() as server:
        http_variant = variant(
            "support-python",
            "runner=http",
            "entry=null",
            f"model={{id: openai/support-bot, base_url: {server.url}/v1}}",
        )
        http_run = play(case("order-status"), http_variant)
        sent = server.requests[0]["messages"]
    assert http_run.error is None
    assert http_run.assistant_texts() == python_run.assistant_texts()
    assert http_run.end_reason == python_run.end_reason == EndReason.USER_STOP
    assert http_run.tool_calls() == [] and [c.name for c in python_run.tool_calls()] == [
        "get_order"
    ]
    assert sent == [{"role": "user", "content": "Hi, where is my order O-1002?"}]


# ------------------------------------------------------------------ environments


class SlowDesk(Environment):
    domain = "slow-desk"
    tool_timeout_s = 0.1

    @tool
    async def get_order(self, order_id: str) -> dict[str, Any]:
        """Look an order up in a back end that never answers."""
        await asyncio.sleep(3600)
        return {}

    @tool
    def explode(self) -> dict[str, Any]:
        """A tool with a bug."""
        raise KeyError("orders")


def test_a_tool_that_hangs_is_a_tool_error_and_a_crashing_tool_is_a_result() -> None:
    env = SlowDesk({})
    outcome = asyncio.run(env.call("explode", {}))
    assert (outcome.is_error, outcome.content) == (
        True,
        "Error: KeyError: 'orders'",
    )
    task = case("order-status")
    task.task.domain = "tests.sim.test_simulation:SlowDesk"
    transcript = play(
        task, variant("support-baseline", SCRIPTED.removeprefix("agent."), "tools=[get_order]")
    )
    assert transcript.end_reason == EndReason.ERROR and transcript.error.side == Side.TOOL
    assert transcript.error.message == "ToolTimeout: tool get_order gave no result within 0.1s"


def test_snapshot_round_trip_and_a_task_that_starts_from_one(tmp_path: Path) -> None:
    desk = read_json(ROOT / "tasks/support/data/desk.json")
    write_snapshot(desk, tmp_path / "desk.sqlite")
    assert read_snapshot(tmp_path / "desk.sqlite") == desk
    task = case("snapshot-refund")
    assert len(task.state["orders"]) == 30 and task.state["today"] == "2026-11-20"
    transcript = play(task)
    assert transcript.final_state["orders"]["O-2047"]["status"] == "refunded"


def test_the_bundled_snapshot_is_what_its_generator_writes(tmp_path: Path) -> None:
    import runpy

    generator = runpy.run_path(str(ROOT / "tasks/support/data/make_snapshot.py"))
    assert read_snapshot(ROOT / "tasks/support/data/prod-snapshot.sqlite") == (
        generator["snapshot"]()
    )


def test_an_unreadable_snapshot_is_a_located_error(tmp_path: Path) -> None:
    (tmp_path / "broken.sqlite").write_text("this is not a database")
    task_file = tmp_path / "task.yaml"
    text = (ROOT / "tasks/support/snapshot-refund.yaml").read_text()
    task_file.write_text(text.replace("data/prod-snapshot.sqlite", "broken.sqlite"))
    line = next(n for n, row in enumerate(text.splitlines(), 1) if "state_db" in row)
    with pytest.raises(SpecError) as caught:
        load_cases([task_file], personas_dir=ROOT / "personas")
    [problem] = caught.value.problems
    assert str(problem) == (
        f"{task_file}:{line}:3: start.state_db: unreadable snapshot: file is not a database"
    )


def test_trials_of_an_llm_user_differ_by_seed_and_are_cached_apart(tmp_path: Path) -> None:
    from harness.models import ResponseCache

    with FakeServer(script({"reply": "thanks ###STOP###"})).running() as server:
        task = case(
            "order-status", personas=(f"model={{id: openai/user-sim, base_url: {server.url}/v1}}",)
        )
        runtime = ModelRuntime(cache=ResponseCache(tmp_path / "c.db"), policy=FAST)
        first = [play(task, runtime=runtime, trial=t) for t in (0, 1)]
        again = [play(task, runtime=runtime, trial=t) for t in (0, 1)]
        assert server.snapshot()["requests"] == 2
    assert [t.messages for t in again] == [t.messages for t in first]
    assert all(t.user_usage.cached_calls == 1 for t in again)

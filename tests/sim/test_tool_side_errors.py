"""Issue 24: a tool's infrastructure failure (a timeout, `ToolUnavailable`) is an `error` of the
tool side under every agent runner, never a failure of the agent; an exception of the agent's
own code stays an agent crash."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from harness.domains import Environment, ToolError, ToolTimeout, ToolUnavailable, tool
from harness.domains.describe import api_guide
from harness.grading.normative import decide
from harness.sim.suite import load_cases
from harness.specs.load import load_agent
from harness.testing.fake_server import FakeServer
from harness.transcript import EndReason, Message, Side, ToolCall, Transcript
from tests.conftest import play_case

DESK = f"{__name__}:FlakyDesk"
TIMEOUT = "ToolTimeout: tool lookup gave no result within 0.1s"
DOWN = "ToolUnavailable: order service refused the connection"


class FlakyDesk(Environment):
    """A desk whose back end hangs or is down, depending on the tool."""

    domain = "flaky-desk"
    tool_timeout_s = 0.1

    @tool
    async def lookup(self, order_id: str) -> dict[str, Any]:
        """Look an order up in a back end that never answers."""
        await asyncio.sleep(3600)
        return {}

    @tool
    def down(self, order_id: str) -> dict[str, Any]:
        """Look an order up in a back end that is down (sync)."""
        raise ToolUnavailable("order service refused the connection")

    @tool
    async def adown(self, order_id: str) -> dict[str, Any]:
        """Look an order up in a back end that is down (async)."""
        await asyncio.sleep(0)
        raise ToolUnavailable("order service refused the connection")

    @tool
    def buggy(self) -> dict[str, Any]:
        """A tool with a bug of its own."""
        raise KeyError("orders")

    @tool
    def note(self, text: str) -> dict[str, Any]:
        """Write a note into the state."""
        self.state["note"] = text
        return {"noted": text}


def write_task(tmp_path: Path) -> Path:
    path = tmp_path / "task.yaml"
    path.write_text(
        f"kind: task\nid: flaky\ntitle: flaky back end\nlevel: 1\ndomain: {DESK}\n"
        "persona: {name: p, model: scripted, scripted_turns: [{reply: 'thanks ###STOP###'}]}\n"
        "scenario: {reason: order status}\n"
        "start: {first_message: 'Where is my order O-1?'}\n"
        "checks:\n  - {kind: tool_called, tool: note}\n"
    )
    return path


def python_agent(tmp_path: Path, code: str) -> Path:
    (tmp_path / "agent.py").write_text(code)
    path = tmp_path / "agent.yaml"
    path.write_text("kind: agent\nname: mine\nrunner: python\nentry: agent.py:respond\n")
    return path


def play(tmp_path: Path, agent_file: Path) -> Transcript:
    [case] = load_cases([write_task(tmp_path)])
    variant = load_agent(agent_file).spec
    return play_case(case, variant)


def assert_tool_side_error(transcript: Transcript, message: str) -> None:
    assert transcript.end_reason == EndReason.ERROR
    assert transcript.error is not None
    assert (transcript.error.side, transcript.error.message) == (Side.TOOL, message)
    verdict = decide(transcript, [])
    assert (verdict.outcome, verdict.error_side, verdict.reason) == ("error", Side.TOOL, message)


# ------------------------------------------------------------------ the public API


def test_tool_unavailable_is_public_and_tool_timeout_is_one() -> None:
    assert issubclass(ToolTimeout, ToolUnavailable)
    assert not issubclass(ToolUnavailable, ToolError) and not issubclass(ToolError, ToolUnavailable)
    env = FlakyDesk({})
    for name, arguments in [("lookup", {"order_id": "O-1"}), ("down", {"order_id": "O-1"})]:
        with pytest.raises(ToolUnavailable):
            asyncio.run(env.call(name, arguments))
    with pytest.raises(ToolTimeout) as timed_out:  # code catching ToolTimeout keeps working
        asyncio.run(env.call("lookup", {"order_id": "O-1"}))
    assert str(timed_out.value) == "tool lookup gave no result within 0.1s"
    guide = api_guide()
    assert "## ToolUnavailable" in guide and "the tool side" in guide


def test_any_other_exception_of_a_tool_is_still_a_result_the_agent_sees(tmp_path: Path) -> None:
    outcome = asyncio.run(FlakyDesk({}).call("buggy", {}))
    assert (outcome.is_error, outcome.content) == (True, "Error: KeyError: 'orders'")
    agent = python_agent(
        tmp_path,
        "from harness.domains import ToolError\n\n"
        "def respond(conversation, tools):\n"
        "    try:\n"
        "        tools.call('buggy')\n"
        "    except ToolError as refusal:\n"
        "        return f'sorry: {refusal}'\n",
    )
    transcript = play(tmp_path, agent)
    assert (transcript.end_reason, transcript.error) == (EndReason.USER_STOP, None)
    assert transcript.assistant_texts()[0] == "sorry: KeyError: 'orders'"


# ------------------------------------------------------------------ runner: python


def test_a_tool_timeout_the_code_lets_through_is_a_tool_error(tmp_path: Path) -> None:
    agent = python_agent(
        tmp_path,
        "async def respond(conversation, tools):\n"
        "    order = await tools.acall('lookup', order_id='O-1')\n"
        "    return f'found {order}'\n",
    )
    transcript = play(tmp_path, agent)
    assert_tool_side_error(transcript, TIMEOUT)
    assert [c.name for c in transcript.tool_calls()] == ["lookup"]


def test_a_tool_timeout_the_code_swallows_is_still_a_tool_error(tmp_path: Path) -> None:
    agent = python_agent(
        tmp_path,
        "def respond(conversation, tools):\n"
        "    try:\n"
        "        tools.call('lookup', order_id='O-1')\n"
        "    except Exception:\n"
        "        pass\n"
        "    try:\n"
        "        tools.call('note', text='after the timeout')\n"
        "    except Exception:\n"
        "        pass\n"
        "    return 'Sorry, our systems are slow today.'\n",
    )
    transcript = play(tmp_path, agent)
    assert_tool_side_error(transcript, TIMEOUT)
    # the environment is not trusted after the failure: nothing more ran on it
    assert [c.name for c in transcript.tool_calls()] == ["lookup"]
    assert "note" not in transcript.final_state


def test_a_tool_timeout_the_code_turns_into_its_own_exception_is_a_tool_error(
    tmp_path: Path,
) -> None:
    agent = python_agent(
        tmp_path,
        "async def respond(conversation, tools):\n"
        "    try:\n"
        "        await tools.acall('lookup', order_id='O-1')\n"
        "    except Exception as exc:\n"
        "        raise RuntimeError('my agent gave up') from exc\n",
    )
    assert_tool_side_error(play(tmp_path, agent), TIMEOUT)


@pytest.mark.parametrize("tool_name", ["down", "adown"])
def test_tool_unavailable_under_the_python_runner_is_a_tool_error(
    tmp_path: Path, tool_name: str
) -> None:
    agent = python_agent(
        tmp_path,
        "def respond(conversation, tools):\n"
        "    try:\n"
        f"        return str(tools.call('{tool_name}', order_id='O-1'))\n"
        "    except Exception as exc:\n"
        "        return f'Sorry: {exc}'\n",
    )
    assert_tool_side_error(play(tmp_path, agent), DOWN)


def test_an_exception_of_the_agents_own_code_is_still_an_agent_crash(tmp_path: Path) -> None:
    agent = python_agent(
        tmp_path,
        "def respond(conversation, tools):\n"
        "    tools.call('note', text='before the bug')\n"
        "    raise ValueError('bad parse')\n",
    )
    transcript = play(tmp_path, agent)
    assert transcript.end_reason == EndReason.AGENT_CRASH
    assert transcript.error is not None
    where = f"{tmp_path.name}/agent.py:3 in respond"  # the innermost frame of the agent's code
    assert (transcript.error.side, transcript.error.message) == (
        Side.AGENT,
        f"{where}: ValueError: bad parse",
    )
    verdict = decide(transcript, [])
    assert (verdict.outcome, verdict.error_side) == ("fail", None)
    assert verdict.reason == f"the agent crashed: {where}: ValueError: bad parse"


def test_the_agents_code_raising_tool_unavailable_itself_is_an_agent_crash(
    tmp_path: Path,
) -> None:
    # only a failure of a tool the harness ran is the tool side; the code's own is the agent's
    agent = python_agent(
        tmp_path,
        "from harness.domains import ToolUnavailable\n\n"
        "def respond(conversation, tools):\n"
        "    raise ToolUnavailable('my own model server is down')\n",
    )
    transcript = play(tmp_path, agent)
    assert transcript.end_reason == EndReason.AGENT_CRASH
    assert decide(transcript, []).outcome == "fail"


# ------------------------------------------------------------------ runner: llm


@pytest.mark.parametrize(
    ("tool_name", "message"), [("down", DOWN), ("adown", DOWN), ("lookup", TIMEOUT)]
)
def test_tool_unavailable_under_the_llm_runner_is_a_tool_error(
    tmp_path: Path, tool_name: str, message: str
) -> None:
    (tmp_path / "script.yaml").write_text(
        "kind: script\nrules:\n"
        f"  - reply: {{tool_calls: [{{name: {tool_name}, arguments: {{order_id: O-1}}}}]}}\n"
    )
    agent = tmp_path / "llm.yaml"
    agent.write_text(
        "kind: agent\nname: llm\nrunner: llm\nsystem_prompt: You help with orders.\n"
        f"model: {{id: scripted, script: script.yaml}}\ntools: [{tool_name}]\n"
    )
    transcript = play(tmp_path, agent)
    assert_tool_side_error(transcript, message)
    assert [c.name for c in transcript.tool_calls()] == [tool_name]


# ------------------------------------------------------------------ runner: http


def test_a_reported_tool_call_whose_replay_fails_is_a_tool_error(tmp_path: Path) -> None:
    noted = ToolCall(id="svc-1", name="note", arguments={"text": "looked it up"})
    failed = ToolCall(id="svc-2", name="down", arguments={"order_id": "O-1"})

    async def service(messages: list[Message]) -> Message:
        return Message(
            role="assistant", content="Order O-1 is on its way.", tool_calls=[noted, failed]
        )

    with FakeServer(responder=service).running() as server:
        agent = tmp_path / "http.yaml"
        agent.write_text(
            "kind: agent\nname: svc\nrunner: http\nreports_tool_calls: true\n"
            f"model: {{id: openai/service, base_url: '{server.url}/v1'}}\n"
        )
        transcript = play(tmp_path, agent)
    assert_tool_side_error(transcript, DOWN)
    assert transcript.tool_calls() == [noted, failed]
    # the replay ran the calls before the failure, in order, and recorded their results
    assert transcript.final_state["note"] == "looked it up"
    assert [m.tool_call_id for m in transcript.messages if m.role == "tool"] == ["svc-1"]

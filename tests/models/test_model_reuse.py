"""One model instance per provider reference per runtime (issue 28): across a whole run with an
LLM persona and an `llm_judge` check, over several tasks and trials, each distinct model
reference gets one provider and one SDK client (one connection pool), closed once; roles that
name the same reference share it, and each role's usage and cost are what they were apart."""

from __future__ import annotations

import asyncio
import collections
import shutil
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

import harness
from harness.models import CallPolicy, ModelError, ModelRuntime, PriceTable
from harness.specs.load import load_script
from harness.testing.fake_server import FakeServer
from harness.transcript import Usage
from tests.conftest import ROOT

TASKS, TRIALS = 3, 2
SIM, AGENT = "openai/sim", "anthropic/agent"
PRICES = {SIM: (1.0, 2.0), AGENT: (3.0, 15.0)}  # USD per million input, output tokens
# The server answers the three roles apart by their system prompts: the judge, the user
# simulator (the conversation seen from the user's side), then the agent.
SERVER_SCRIPT = """kind: script
rules:
  - when: {system: impartial evaluator}
    reply: '{"reasoning": "The agent gave the order status.", "passed": true}'
  - when: {system: You are playing a user, matches: "(?i)anything else"}
    reply: "No, thank you. ###STOP###"
  - when: {system: You are playing a user}
    reply: It is order O-1002.
  - when: {user: O-1002}
    reply: Order O-1002 has shipped. Anything else?
  - reply: Which order is it?
"""
PERSONA = """kind: persona
name: llm-user
description: A customer who wants to know where an order is.
model: {id: openai/sim, base_url: "URL/v1"}
"""
AGENT_FILE = """kind: agent
name: reuse-agent
model: {id: anthropic/agent, base_url: "URL"}
system_prompt: You are a support agent.
"""


def task_yaml(index: int) -> str:
    return f"""kind: task
id: status-{index}
title: Where is my order
level: 1
domain: support
persona: llm-user
scenario:
  reason: You want to know where your order is.
  instructions: Ask where order O-1002 is.
  known_info: {{order_id: O-1002}}
start:
  state_file: data/desk.json
  first_message: Hi, where is my order? (asking for the {index + 1}. time)
end:
  max_turns: 4
checks:
  - kind: text
    name: gives the status
    contains: has shipped
  - kind: llm_judge
    name: answers the question
    criterion: The agent tells the user the status of the order.
"""


def counting(function: Any, counts: collections.Counter[str], key: str) -> Any:
    """`function` (a method of an SDK client class, sync or async), counting its calls."""
    if asyncio.iscoroutinefunction(function):

        async def counted_async(*args: Any, **kwargs: Any) -> Any:
            counts[key] += 1
            return await function(*args, **kwargs)

        return counted_async

    def counted(*args: Any, **kwargs: Any) -> Any:
        counts[key] += 1
        return function(*args, **kwargs)

    return counted


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> collections.Counter[str]:
    """How many clients of each official SDK were made, and closed (the SDKs' own classes,
    wrapped to count)."""
    counts: collections.Counter[str] = collections.Counter()
    for sdk_class in (openai.AsyncOpenAI, anthropic.AsyncAnthropic):
        name = sdk_class.__name__
        monkeypatch.setattr(sdk_class, "__init__", counting(sdk_class.__init__, counts, name))
        monkeypatch.setattr(sdk_class, "close", counting(sdk_class.close, counts, f"{name}.close"))
    return counts


@pytest.fixture
def served(tmp_path: Path) -> Any:
    """The fake server, and a suite of LLM-persona tasks and an agent, all pointing at it."""
    (tmp_path / "server.yaml").write_text(SERVER_SCRIPT)
    with FakeServer(load_script(tmp_path / "server.yaml").spec).running() as server:
        (tmp_path / "tasks/data").mkdir(parents=True)
        shutil.copy(ROOT / "tasks/support/data/desk.json", tmp_path / "tasks/data/desk.json")
        for index in range(TASKS):
            (tmp_path / f"tasks/status-{index}.yaml").write_text(task_yaml(index))
        (tmp_path / "personas").mkdir()
        (tmp_path / "personas/llm-user.yaml").write_text(PERSONA.replace("URL", server.url))
        (tmp_path / "agent.yaml").write_text(AGENT_FILE.replace("URL", server.url))
        prices = "\n".join(f"{m}: {{input: {i}, output: {o}}}" for m, (i, o) in PRICES.items())
        (tmp_path / "prices.yaml").write_text(prices)
        yield server, tmp_path


def evaluate(
    served: Any, judge: dict[str, Any], counts: collections.Counter[str]
) -> tuple[harness.RunResult, collections.Counter[str], collections.Counter[str]]:
    """One run through one runtime, closed at the end: the run, the SDK clients it made and
    closed, and the model calls the server saw by role."""
    server, folder = served
    counts.clear()
    server.requests.clear()
    suite = harness.load_suite(folder / "tasks", personas=folder / "personas")
    agent = harness.load_agent(folder / "agent.yaml")
    runtime = ModelRuntime(
        prices=PriceTable(folder / "prices.yaml"),
        policy=CallPolicy(timeout_s=10, max_retries=0),
    )

    async def run() -> harness.RunResult:
        try:
            return await harness.evaluate_async(
                suite,
                agent,
                trials=TRIALS,
                store=folder / "results.db",
                judge_model=judge,
                runtime=runtime,
            )
        finally:
            await runtime.aclose()

    result = asyncio.run(run())
    runtime.close()
    roles: collections.Counter[str] = collections.Counter()
    for request in server.requests:
        if request["protocol"] == "anthropic":
            roles["agent"] += 1
        elif "impartial evaluator" in request["messages"][0]["content"]:
            roles["judge"] += 1
        else:
            roles["user"] += 1
    return result, collections.Counter(counts), roles


def priced(usage: Usage, model: str) -> float:
    price_in, price_out = PRICES[model]
    return (usage.input_tokens * price_in + usage.output_tokens * price_out) / 1_000_000


def no_latency(usage: Usage) -> Usage:
    return usage.model_copy(update={"latency_s": 0.0})


def test_one_provider_and_client_per_model_reference_across_a_run(
    served: Any, counted: collections.Counter[str]
) -> None:
    server, _ = served
    user_ref = {"id": SIM, "base_url": f"{server.url}/v1"}
    # The judge on the persona's reference: one client serves the user simulator and the judge.
    shared, made, calls = evaluate(served, user_ref, counted)
    episodes = shared.episodes
    assert len(episodes) == TASKS * TRIALS
    assert all(e.outcome == "pass" and e.transcript.error is None for e in episodes)
    assert calls == {
        "agent": 2 * TASKS * TRIALS,
        "user": 2 * TASKS * TRIALS,
        "judge": TASKS * TRIALS,
    }
    assert made == {
        "AsyncAnthropic": 1,  # the agent's
        "AsyncOpenAI": 1,  # the user simulator's and the judge's
        "AsyncAnthropic.close": 1,
        "AsyncOpenAI.close": 1,
    }, "each model reference: one client for the run, closed once"

    # The judge on a reference of its own (another key variable): a client of its own.
    apart, made, calls_apart = evaluate(served, {**user_ref, "api_key_env": "JUDGE_KEY"}, counted)
    assert made == {
        "AsyncAnthropic": 1,
        "AsyncOpenAI": 2,
        "AsyncAnthropic.close": 1,
        "AsyncOpenAI.close": 2,
    }
    assert calls_apart == calls

    # Each role's usage is what the server answered for that role, priced by its model, and
    # the same whether or not the roles share their client.
    figures = shared.figures
    for usage, role, model in (
        (figures.usage, "agent", AGENT),
        (figures.user_usage, "user", SIM),
        (figures.judge_usage, "judge", SIM),
    ):
        assert usage.calls == calls[role] and usage.input_tokens > 0 and usage.output_tokens > 0
        assert usage.cost_usd == pytest.approx(priced(usage, model))
        assert usage.unpriced == []
    assert figures.user_usage != figures.judge_usage
    for mine, theirs in (
        (figures.usage, apart.figures.usage),
        (figures.user_usage, apart.figures.user_usage),
        (figures.judge_usage, apart.figures.judge_usage),
    ):
        assert no_latency(mine) == no_latency(theirs)


def test_the_runtime_gives_one_instance_per_reference_and_one_model_per_role() -> None:
    runtime = ModelRuntime()
    script = {"id": "scripted", "script": str(ROOT / "agents/scripts/judge.yaml")}
    judge = runtime.model(script, "judge")
    assert runtime.model(dict(script), "judge") is judge, "the same reference and role"
    user = runtime.model(script, "user simulator")
    assert user is not judge and user.role == "user simulator" and user.inner is judge.inner
    limited = runtime.model({**script, "max_concurrency": 2}, "judge")
    assert limited.inner is judge.inner and limited.limit == 2 and judge.limit != 2
    other = runtime.model(
        {"id": "scripted", "script": str(ROOT / "agents/scripts/support.yaml")}, "judge"
    )
    assert other.inner is not judge.inner
    with pytest.raises(ModelError, match="unknown model provider"):
        runtime.model("nosuch/model", "judge")
    runtime.close()

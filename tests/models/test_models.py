"""Model providers and the runtime around them, driven through the real `openai` and `anthropic`
clients against the fake server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.models import (
    CallPolicy,
    CompletionParams,
    ModelError,
    ModelRuntime,
    PriceTable,
    ResponseCache,
)
from harness.models.errors import retry_after_seconds
from harness.specs.located import SpecError
from harness.specs.script import Script
from harness.testing.fake_server import FakeServer, Faults
from harness.transcript import Message, ToolSpec, Usage

WEATHER = Script.model_validate(
    {
        "kind": "script",
        "rules": [
            {
                "when": {"user": r"weather in (\w+)"},
                "reply": {
                    "content": "Let me check.",
                    "tool_calls": [{"name": "get_weather", "arguments": {"city": "{u.1}"}}],
                },
            },
            {
                "when": {"tool": "get_weather", "error": False},
                "reply": "It is {result.temp} degrees in {args.city}.",
            },
            {
                "when": {"tool": "get_weather", "error": True},
                "reply": "The weather service failed.",
            },
            {"when": {"matches": "(?s).+"}, "reply": "echo: {m.0}"},
        ],
    }
)
TOOLS = [
    ToolSpec(
        name="get_weather",
        description="Current weather.",
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    )
]
FAST = CallPolicy(timeout_s=0.5, max_retries=3, backoff_base_s=0.01, backoff_max_s=0.05)


def ref(protocol: str, server: FakeServer, **extra) -> dict:
    if protocol == "openai":
        return {"id": "openai/fake-model", "base_url": f"{server.url}/v1", **extra}
    return {"id": "anthropic/fake-model", "base_url": server.url, **extra}


def ask(model, text: str, trial: int = 0, tools=TOOLS):
    messages = [Message(role="system", content="Be brief."), Message(role="user", content=text)]
    return asyncio.run(model.complete(messages, tools, CompletionParams(trial=trial)))


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_tool_call_round_trip(protocol: str) -> None:
    with FakeServer(WEATHER).running() as server:
        model = ModelRuntime(policy=FAST).model(ref(protocol, server), "agent")

        async def conversation():
            messages = [
                Message(role="system", content="Be brief."),
                Message(role="user", content="weather in Paris?"),
            ]
            first = await model.complete(messages, TOOLS, CompletionParams())
            call = first.message.tool_calls[0]
            messages += [
                first.message,
                Message(role="tool", tool_call_id=call.id, name=call.name, content='{"temp": 21}'),
            ]
            second = await model.complete(messages, TOOLS, CompletionParams())
            return first, second

        first, second = asyncio.run(conversation())
        sent = server.requests[-1]
    assert first.message.content == "Let me check."
    assert [(c.name, c.arguments) for c in first.message.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert second.message.content == "It is 21 degrees in Paris."
    assert second.usage.calls == 1 and second.usage.output_tokens == 6
    call_id = first.message.tool_calls[0].id
    if protocol == "openai":
        assert sent["messages"][0] == {"role": "system", "content": "Be brief."}
        assert sent["messages"][2]["tool_calls"][0]["function"] == {
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
        }
        assert sent["messages"][3] == {
            "role": "tool",
            "tool_call_id": call_id,
            "content": '{"temp": 21}',
        }
        assert sent["tools"][0]["function"]["parameters"]["required"] == ["city"]
    else:
        assert sent["system"] == "Be brief."
        assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
        assert sent["messages"][1]["content"][1] == {
            "type": "tool_use",
            "id": call_id,
            "name": "get_weather",
            "input": {"city": "Paris"},
        }
        assert sent["messages"][2]["content"] == [
            {
                "type": "tool_result",
                "tool_use_id": call_id,
                "content": '{"temp": 21}',
                "is_error": False,
            }
        ]
        assert sent["tools"][0]["input_schema"]["required"] == ["city"]


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_thirty_percent_faults_end_in_success_or_a_recorded_error(protocol: str) -> None:
    faults = Faults(
        rate_429=0.1, rate_500=0.1, rate_hang=0.05, rate_malformed=0.05, retry_after_s=0.01, seed=7
    )
    calls = 60
    with FakeServer(WEATHER, faults=faults).running() as server:
        model = ModelRuntime(policy=FAST).model(ref(protocol, server), "agent")

        async def many():
            jobs = [
                model.complete([Message(role="user", content=f"hello {i}")], [], CompletionParams())
                for i in range(calls)
            ]
            return await asyncio.gather(*jobs, return_exceptions=True)

        outcomes = asyncio.run(many())
        stats = server.snapshot()
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert all(isinstance(e, ModelError) for e in errors), errors
    successes = [o for o in outcomes if not isinstance(o, BaseException)]
    assert [s.message.content for s in successes] == [
        f"echo: hello {i}" for i, o in enumerate(outcomes) if not isinstance(o, BaseException)
    ]
    assert len(successes) >= calls * 0.9  # four attempts at 30% faults rarely all fail
    assert set(stats["faults"]) == {"429", "500", "hang", "malformed"}
    assert calls < stats["requests"] <= calls * (FAST.max_retries + 1)
    for error in errors:
        assert str(error).startswith("agent model ") and "after 4 attempts" in str(error)


def test_errors_that_are_not_retryable_fail_at_once() -> None:
    with FakeServer(WEATHER, faults=Faults(rate_401_echo=1.0)).running() as server:
        model = ModelRuntime(policy=FAST).model(ref("openai", server), "judge")
        with pytest.raises(ModelError, match=r"^judge model openai/fake-model: HTTP 401"):
            ask(model, "hi")
        assert server.snapshot()["requests"] == 1


def test_cache_replays_identical_results_without_requests(tmp_path: Path) -> None:
    with FakeServer(WEATHER).running() as server:

        def run_all() -> list:
            runtime = ModelRuntime(cache=ResponseCache(tmp_path / "cache.db"), policy=FAST)
            model = runtime.model(ref("openai", server), "agent")
            results = [
                ask(model, f"weather in {city}?", trial)
                for city in ("Oslo", "Rome")
                for trial in (0, 1)
            ]
            runtime.close()
            return results

        first = run_all()
        assert server.snapshot()["requests"] == 4, "each trial is its own cache entry"
        second = run_all()
        assert server.snapshot()["requests"] == 4, "the rerun made no request"
    assert [c.message for c in second] == [c.message for c in first]
    assert all(c.usage.cached_calls == 1 for c in second)


def test_errors_are_never_cached(tmp_path: Path) -> None:
    with FakeServer(WEATHER, faults=Faults(rate_500=1.0)).running() as server:
        runtime = ModelRuntime(
            cache=ResponseCache(tmp_path / "cache.db"), policy=CallPolicy(max_retries=0)
        )
        model = runtime.model(ref("anthropic", server), "agent")
        for _ in range(2):
            with pytest.raises(ModelError, match="HTTP 500"):
                ask(model, "hi")
        assert server.snapshot()["requests"] == 2
        runtime.close()


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_in_flight_requests_never_exceed_the_limit(protocol: str) -> None:
    with FakeServer(WEATHER, latency_s=0.05).running() as server:
        model = ModelRuntime(policy=FAST).model(ref(protocol, server, max_concurrency=5), "agent")

        async def many():
            await asyncio.gather(
                *[
                    model.complete([Message(role="user", content="x")], [], CompletionParams())
                    for _ in range(40)
                ]
            )

        asyncio.run(many())
        stats = server.snapshot()
    assert stats["requests"] == 40
    assert stats["max_in_flight"] == 5


def test_the_fake_servers_latency_counts_from_the_requests_arrival() -> None:
    """A provider's latency is the time to its reply: the fake server's own work (here a
    responder that takes a while) is inside `latency_s`, not added to it, so a bench's ideal
    time (calls x latency / concurrency) is what the server can give. Work longer than the
    latency is waited for."""
    import httpx

    async def working(messages: list[Message]) -> Message:
        await asyncio.sleep(float(messages[-1].content))
        return Message(role="assistant", content="done")

    with FakeServer(latency_s=1.0, responder=working).running() as server:

        def answered_in(work_s: float) -> float:
            body = {"model": "m", "messages": [{"role": "user", "content": str(work_s)}]}
            started = time.perf_counter()
            httpx.post(f"{server.url}/v1/chat/completions", json=body).raise_for_status()
            return time.perf_counter() - started

        assert 1.0 <= answered_in(0.6) < 1.4  # not 1.6: the work was inside the latency
        assert 1.3 <= answered_in(1.3) < 1.8  # not 2.3


def test_retry_after_is_honoured_and_backoff_is_bounded() -> None:
    policy = CallPolicy(backoff_base_s=0.5, backoff_max_s=4)
    assert policy.delay(0, retry_after=1.5) == 1.5
    assert policy.delay(3, retry_after=100) == 4
    assert all(
        0 <= policy.delay(attempt, None) <= min(4, 0.5 * 2**attempt)
        for attempt in range(8)
        for _ in range(20)
    )
    assert retry_after_seconds({"retry-after": "2"}) == 2
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0
    assert retry_after_seconds({}) is None


def test_cost_from_the_price_table_and_an_override(tmp_path: Path) -> None:
    table = PriceTable()
    assert table.cost("openai/gpt-4.1-mini", 1_000_000, 500_000) == pytest.approx(0.40 + 0.80)
    assert table.cost("local/smollm2", 10**6, 10**6) == 0
    assert table.cost("openai/unknown", 10, 10) == 0 and table.unpriced == {"openai/unknown"}
    override = tmp_path / "prices.yaml"
    override.write_text("openai/fake-model: {input: 1.0, output: 2.0}\n")
    with FakeServer(WEATHER).running() as server:
        runtime = ModelRuntime(prices=PriceTable(override), policy=FAST)
        completion = ask(runtime.model(ref("openai", server), "agent"), "weather in Oslo?")
    usage = completion.usage
    assert usage.cost_usd == pytest.approx((usage.input_tokens + 2 * usage.output_tokens) / 1e6)
    override.write_text("openai/fake-model: {input: cheap}\n")
    with pytest.raises(SpecError) as caught:
        PriceTable(override)
    assert [str(p) for p in caught.value.problems] == [
        f"{override}:1:1: openai/fake-model.output: required field is missing",
        f"{override}:1:21: openai/fake-model.input: Input should be a valid number, unable to "
        "parse string as a number, found 'cheap'",
    ]


def test_missing_key_for_a_hosted_model_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ModelError, match=r"openai/gpt-4\.1-mini: set OPENAI_API_KEY"):
        ModelRuntime().model("openai/gpt-4.1-mini", "agent")


def test_server_cli_serves_both_protocols(tmp_path: Path) -> None:
    import subprocess
    import sys

    process = subprocess.Popen(
        [sys.executable, "-m", "harness", "fake-server", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stderr.readline()
        url = line.strip().rsplit(" ", 1)[-1]
        assert line.startswith("serving OpenAI and Anthropic protocols at http://127.0.0.1:")
        runtime = ModelRuntime(policy=FAST)
        for model in (
            {"id": "openai/x", "base_url": f"{url}/v1"},
            {"id": "anthropic/x", "base_url": url},
        ):
            assert ask(runtime.model(model, "agent"), "ping").message.content == "echo: ping"
    finally:
        process.terminate()
        process.wait(10)


def test_a_model_without_a_price_is_named_in_its_usage(tmp_path: Path) -> None:
    """An unpriced model costs $0 only as a lower bound: its usage says so, so that a cost
    budget cannot pass on it."""
    override = tmp_path / "prices.yaml"
    override.write_text("openai/fake-model: {input: 1.0, output: 2.0}\n")
    with FakeServer(WEATHER).running() as server:
        unpriced = ask(ModelRuntime(policy=FAST).model(ref("openai", server), "agent"), "hi")
        priced = ask(
            ModelRuntime(prices=PriceTable(override), policy=FAST).model(
                ref("openai", server), "agent"
            ),
            "hi",
        )
    assert unpriced.usage.cost_usd == 0 and unpriced.usage.unpriced == ["openai/fake-model"]
    assert priced.usage.unpriced == []
    total = Usage()
    total.add(unpriced.usage)
    total.add(priced.usage)
    assert total.unpriced == ["openai/fake-model"]


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Keeps each request's path, headers and body; answers one fixed chat completion."""

    seen: list[tuple[str, dict[str, str], bytes]] = []
    reply = json.dumps(
        {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": "fake-model",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "It is 21 degrees."},
                }
            ],
            "usage": {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14},
        }
    ).encode()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        self.seen.append((self.path, dict(self.headers), body))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(self.reply)))
        self.end_headers()
        self.wfile.write(self.reply)

    def log_message(self, *args) -> None:
        pass


def test_the_provider_sends_the_bytes_the_sdks_create_sends(monkeypatch) -> None:
    """The openai provider posts its wire body with the client's `post` (skipping `create`'s
    parameter transform): the same path, body bytes and headers as `create` with that body."""
    import openai

    from harness.models.openai_provider import OpenAIModel
    from harness.specs.agent import ModelRef
    from harness.transcript import ToolCall

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/v1"
    _Recorder.seen = []
    messages = [
        Message(role="system", content="Be brief."),
        Message(role="user", content="What is the weather in Paris? 🌦 «quoted»"),
        Message(
            role="assistant",
            content="",
            tool_calls=[ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"})],
        ),
        Message(role="tool", tool_call_id="call_1", name="get_weather", content='{"temp": 21}'),
    ]
    try:
        model = OpenAIModel(ModelRef(id="openai/fake-model", base_url=url))
        completion = asyncio.run(model.complete(messages, TOOLS, CompletionParams(trial=3)))
        sent = json.loads(_Recorder.seen[0][2])

        async def through_create() -> None:
            client = openai.AsyncOpenAI(base_url=url, max_retries=0)
            await client.chat.completions.create(**sent)
            await client.close()

        asyncio.run(through_create())
    finally:
        server.shutdown()
        server.server_close()
    assert completion.message.content == "It is 21 degrees." and completion.usage.input_tokens == 9
    (path, headers, body), (create_path, create_headers, create_body) = _Recorder.seen
    assert sent["messages"][2]["tool_calls"][0]["function"]["arguments"] == '{"city": "Paris"}'
    assert (path, body) == (create_path, create_body)
    varying = {"idempotency-key", "x-stainless-retry-count", "x-stainless-read-timeout"}
    assert {k.lower(): v for k, v in headers.items() if k.lower() not in varying} == {
        k.lower(): v for k, v in create_headers.items() if k.lower() not in varying
    }


LEFT_OPEN = """
import asyncio, gc
from harness.models import CompletionParams, ModelRuntime
from harness.specs.script import Script
from harness.testing.fake_server import FakeServer
from harness.transcript import Message

script = Script.model_validate({"kind": "script", "rules": [{"reply": "hello"}]})
with FakeServer(script).running() as server:
    url = f"{server.url}/v1" if "PROTOCOL" == "openai" else server.url
    model = ModelRuntime().model({"id": "PROTOCOL/fake-model", "base_url": url}, "agent")
    ask = [Message(role="user", content="hi")]
    replies = [asyncio.run(model.complete(ask, [], CompletionParams())) for _ in range(2)]
    gc.collect()
print(*(r.message.content for r in replies))
"""


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_model_left_open_is_closed_with_its_event_loop(protocol: str) -> None:
    """A model used under `asyncio.run` and never closed (a script or a notebook calling the
    API) has its client closed as each loop ends: both calls answer, and nothing is printed
    about an unclosed session or connector (the SDKs' aiohttp transport would say so)."""
    done = subprocess.run(
        [sys.executable, "-c", LEFT_OPEN.replace("PROTOCOL", protocol)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "ANTHROPIC_API_KEY": "x", "OPENAI_API_KEY": "x"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["hello", "hello"]
    assert "Unclosed" not in done.stderr, done.stderr

"""The fake server streams as the real services do: the real `openai` and `anthropic` clients,
streaming, reassemble the same reply the server gives unstreamed, and weave records a streamed
call of an app as the whole message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from harness.specs.script import Script
from harness.testing.fake_server import FakeServer, Faults
from tests.conftest import ROOT, run_cli

SCRIPT = Script.model_validate(
    {
        "kind": "script",
        "rules": [
            {
                "when": {"user": r"weather in (\w+) and (\w+)"},
                "reply": {
                    "content": "Checking both cities.",
                    "tool_calls": [
                        {"name": "get_weather", "arguments": {"city": "{u.1}", "units": "C"}},
                        {"name": "get_weather", "arguments": {"city": "{u.2}", "units": "C"}},
                    ],
                },
            },
            {"reply": "The weather is fine in every city you could name today."},
        ],
    }
)
TEXT = [{"role": "user", "content": "How is the weather?"}]
TWO_CALLS = [{"role": "user", "content": "weather in Paris and Oslo"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    with FakeServer(SCRIPT).running() as running:
        yield running


def openai_client(server: FakeServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="sk-test", max_retries=0)


def anthropic_client(server: FakeServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key="sk-test", max_retries=0)


def test_openai_streamed_text_is_the_unstreamed_text_with_its_usage(server: FakeServer) -> None:
    client = openai_client(server)
    whole = client.chat.completions.create(model="gpt-x", messages=TEXT)
    chunks = list(
        client.chat.completions.create(
            model="gpt-x", messages=TEXT, stream=True, stream_options={"include_usage": True}
        )
    )
    *streamed, usage_chunk = chunks
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert streamed[0].choices[0].delta.role == "assistant"
    assert streamed[0].choices[0].delta.content == ""
    pieces = [c.choices[0].delta.content for c in streamed[1:] if c.choices[0].delta.content]
    assert len(pieces) > 1
    assert "".join(pieces) == whole.choices[0].message.content
    assert [c.choices[0].finish_reason for c in streamed][-1] == "stop"
    assert all(c.usage is None for c in streamed)
    assert usage_chunk.choices == []
    assert usage_chunk.usage is not None and whole.usage is not None
    assert usage_chunk.usage.model_dump() == whole.usage.model_dump()
    assert (
        usage_chunk.usage.total_tokens == whole.usage.prompt_tokens + whole.usage.completion_tokens
    )

    unasked = list(client.chat.completions.create(model="gpt-x", messages=TEXT, stream=True))
    assert all(c.choices and c.usage is None for c in unasked)


def accumulate_tool_calls(chunks: list[Any]) -> dict[int, dict[str, str]]:
    """Tool calls from their deltas, by index, as a streaming app assembles them."""
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        deltas = chunk.choices[0].delta.tool_calls if chunk.choices else None
        for delta in deltas or []:
            call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            call["id"] += delta.id or ""
            if delta.function is not None:
                call["name"] += delta.function.name or ""
                call["arguments"] += delta.function.arguments or ""
    return calls


def test_openai_streamed_parallel_tool_calls_reassemble_by_index(server: FakeServer) -> None:
    client = openai_client(server)
    whole = client.chat.completions.create(model="gpt-x", messages=TWO_CALLS, tools=TOOLS)
    expected = [
        {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
        for c in whole.choices[0].message.tool_calls or []
    ]
    assert len(expected) == 2
    chunks = list(
        client.chat.completions.create(model="gpt-x", messages=TWO_CALLS, tools=TOOLS, stream=True)
    )
    calls = accumulate_tool_calls(chunks)
    assert sorted(calls) == [0, 1]
    assert [calls[0], calls[1]] == expected
    assert [json.loads(c["arguments"]) for c in expected] == [
        {"city": "Paris", "units": "C"},
        {"city": "Oslo", "units": "C"},
    ]
    argument_deltas = [
        d
        for c in chunks
        for d in c.choices[0].delta.tool_calls or []
        if d.id is None and d.function and d.function.arguments
    ]
    assert len([d for d in argument_deltas if d.index == 0]) > 1
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == whole.choices[0].message.content == "Checking both cities."
    assert chunks[-1].choices[0].finish_reason == "tool_calls"

    with client.chat.completions.stream(model="gpt-x", messages=TWO_CALLS, tools=TOOLS) as stream:
        final = stream.get_final_completion()
    message = final.choices[0].message
    assert final.choices[0].finish_reason == "tool_calls"
    assert message.content == "Checking both cities."
    assert [
        {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
        for c in message.tool_calls or []
    ] == expected


@pytest.mark.parametrize("messages", [TEXT, TWO_CALLS], ids=["text", "tool_use"])
def test_anthropic_stream_gives_the_unstreamed_message(
    server: FakeServer, messages: list[dict[str, str]]
) -> None:
    client = anthropic_client(server)
    whole = client.messages.create(model="claude-x", max_tokens=100, messages=messages)
    with client.messages.stream(model="claude-x", max_tokens=100, messages=messages) as stream:
        final = stream.get_final_message()
    assert [b.model_dump(exclude_none=True) for b in final.content] == [
        b.model_dump(exclude_none=True) for b in whole.content
    ]
    assert final.stop_reason == whole.stop_reason
    assert final.stop_reason == ("tool_use" if messages is TWO_CALLS else "end_turn")
    assert (final.usage.input_tokens, final.usage.output_tokens) == (
        whole.usage.input_tokens,
        whole.usage.output_tokens,
    )


def test_anthropic_events_come_in_the_api_order(server: FakeServer) -> None:
    client = anthropic_client(server)
    events = list(
        client.messages.create(model="claude-x", max_tokens=100, messages=TWO_CALLS, stream=True)
    )
    kinds = [e.type for e in events if e.type != "ping"]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    starts = [e for e in events if e.type == "content_block_start"]
    assert [b.content_block.type for b in starts] == ["text", "tool_use", "tool_use"]
    assert [b.index for b in starts] == [0, 1, 2]
    json_pieces = [
        e.delta.partial_json
        for e in events
        if e.type == "content_block_delta" and e.delta.type == "input_json_delta" and e.index == 1
    ]
    assert len(json_pieces) > 1
    assert json.loads("".join(json_pieces)) == {"city": "Paris", "units": "C"}
    assert len([e for e in events if e.type == "content_block_stop"]) == 3


def test_faults_answer_a_streaming_request_before_any_event() -> None:
    with FakeServer(SCRIPT, faults=Faults(rate_429=1.0)).running() as server:
        with pytest.raises(openai.RateLimitError):
            openai_client(server).chat.completions.create(model="gpt-x", messages=TEXT, stream=True)
        with pytest.raises(anthropic.RateLimitError):
            anthropic_client(server).messages.create(
                model="claude-x", max_tokens=100, messages=TEXT, stream=True
            )


def test_a_malformed_stream_fails_the_streaming_client() -> None:
    with FakeServer(SCRIPT, faults=Faults(rate_malformed=1.0)).running() as server:
        with pytest.raises(ValueError):
            list(
                openai_client(server).chat.completions.create(
                    model="gpt-x", messages=TEXT, stream=True
                )
            )
        with pytest.raises(ValueError):
            list(
                anthropic_client(server).messages.create(
                    model="claude-x", max_tokens=100, messages=TEXT, stream=True
                )
            )


RECORDING_APP = textwrap.dedent(
    """
    import sys

    import openai
    import weave

    from harness.tracing import record_locally

    tracer = record_locally(sys.argv[1])
    client = openai.OpenAI(base_url=sys.argv[2] + "/v1", api_key="sk-test")

    @weave.op
    def ask(text: str) -> str:
        stream = client.chat.completions.create(
            model="gpt-x",
            messages=[{"role": "user", "content": text}],
            tools=TOOLS,
            stream=True,
            stream_options={"include_usage": True},
        )
        return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    ask("How is the weather?")
    ask("weather in Paris and Oslo")
    tracer.close()
    """
)


def test_weave_records_a_streamed_openai_call_as_the_whole_message(tmp_path: Path) -> None:
    app, store, export = tmp_path / "app.py", tmp_path / "traces.db", tmp_path / "calls.jsonl"
    app.write_text(f"TOOLS = {TOOLS!r}\n{RECORDING_APP}")
    with FakeServer(SCRIPT).running() as server:
        served = subprocess.run(
            [sys.executable, str(app), str(store), server.url],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert served.returncode == 0, served.stderr
        assert all(r.get("stream") is True for r in server.requests)
    exported = run_cli("traces", "export", "--trace-store", store, "--out", export)
    assert exported.returncode == 0, exported.stderr
    records = [json.loads(line) for line in export.read_text().splitlines()]
    model_calls = [r for r in records if "openai.chat.completions.create" in r["op_name"]]
    assert len(model_calls) == 2
    text, tools = (call["output"]["choices"][0] for call in model_calls)
    assert text["message"]["content"] == "The weather is fine in every city you could name today."
    assert text["finish_reason"] == "stop"
    assert tools["finish_reason"] == "tool_calls"
    assert tools["message"]["content"] == "Checking both cities."
    assert [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in tools["message"]["tool_calls"]
    ] == [
        ("get_weather", {"city": "Paris", "units": "C"}),
        ("get_weather", {"city": "Oslo", "units": "C"}),
    ]
    usage = model_calls[0]["output"]["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0

"""The fake model server's streamed replies: a reply cut into the server-sent events of the
OpenAI chat-completions and Anthropic messages streams, and sent as a chunked body."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

# The first event of a stream, cut off mid-JSON: the malformed fault of a streaming request.
BROKEN_EVENT = {
    "openai": b'data: {"id": "x", "choices": [{"delta": \n\n',
    "anthropic": b'event: message_start\ndata: {"type": "message_start", "message": \n\n',
}


@dataclass
class Stream:
    """A 200 `text/event-stream` response: its server-sent events, each already encoded."""

    events: list[bytes]


async def send_stream(writer: asyncio.StreamWriter, stream: Stream) -> None:
    """Each event as one chunk of a chunked body, so the connection stays open for the next
    request as with a sized body, and the client reads the events as they arrive."""
    head = [
        "HTTP/1.1 200 OK",
        "content-type: text/event-stream; charset=utf-8",
        "cache-control: no-cache",
        "transfer-encoding: chunked",
    ]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
    for event in stream.events:
        writer.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
        await writer.drain()
    writer.write(b"0\r\n\r\n")
    await writer.drain()


def _pieces(text: str, count: int = 3) -> list[str]:
    """`text` cut into up to `count` consecutive pieces, as a model's tokens arrive."""
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _sse(payload: Any, event: str | None = None) -> bytes:
    name = f"event: {event}\n" if event else ""
    return f"{name}data: {json.dumps(payload)}\n\n".encode()


def openai_events(body: dict[str, Any], include_usage: bool) -> list[bytes]:
    """A chat completion as OpenAI streams it: the role, content deltas, each tool call's id and
    name then its arguments in pieces (by `index`), the finish reason, the usage chunk when asked
    for, and `[DONE]`."""
    [choice] = body["choices"]
    message = choice["message"]
    base: dict[str, Any] = {
        "id": body["id"],
        "object": "chat.completion.chunk",
        "created": body["created"],
        "model": body["model"],
    }
    if include_usage:
        base["usage"] = None  # as OpenAI: null on every chunk but the last

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            **base,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }

    text: str | None = message.get("content")
    chunks = [chunk({"role": "assistant", "content": None if text is None else ""})]
    chunks += [chunk({"content": piece}) for piece in _pieces(text or "")]
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        opening = {"name": function["name"], "arguments": ""}
        chunks.append(
            chunk(
                {
                    "tool_calls": [
                        {"index": index, "id": call["id"], "type": "function", "function": opening}
                    ]
                }
            )
        )
        chunks += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in _pieces(function["arguments"])
        ]
    chunks.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        chunks.append({**base, "choices": [], "usage": body["usage"]})
    return [_sse(c) for c in chunks] + [b"data: [DONE]\n\n"]


def anthropic_events(body: dict[str, Any]) -> list[bytes]:
    """A message as Anthropic streams it: `message_start` (no content yet), each content block
    started, filled by `text_delta` or `input_json_delta` pieces and stopped, then the stop
    reason and output tokens in `message_delta`, and `message_stop`."""
    usage = body["usage"]
    start = {
        **body,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 0},
    }
    events = [
        _sse({"type": "message_start", "message": start}, "message_start"),
        _sse({"type": "ping"}, "ping"),
    ]
    for index, block in enumerate(body["content"]):
        if block["type"] == "text":
            opening: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(block["text"])]
        else:
            opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": piece}
                for piece in _pieces(json.dumps(block["input"]))
            ]
        events.append(
            _sse(
                {"type": "content_block_start", "index": index, "content_block": opening},
                "content_block_start",
            )
        )
        events += [
            _sse(
                {"type": "content_block_delta", "index": index, "delta": delta},
                "content_block_delta",
            )
            for delta in deltas
        ]
        events.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    stop = {"stop_reason": body["stop_reason"], "stop_sequence": None}
    events += [
        _sse(
            {
                "type": "message_delta",
                "delta": stop,
                "usage": {"output_tokens": usage["output_tokens"]},
            },
            "message_delta",
        ),
        _sse({"type": "message_stop"}, "message_stop"),
    ]
    return events

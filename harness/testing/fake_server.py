"""A local model server for tests and benchmarks that speaks both the OpenAI chat-completions and
the Anthropic messages wire protocols on 127.0.0.1.

Replies come from a script of the `scripted` model (text and tool calls), or from an async
`responder` function (an agent service of a test), at a configurable latency counted from
the request's arrival (the server's own work is inside it). Faults can be injected at given
rates: 429 with `Retry-After`, 500, a connection that hangs, a malformed JSON body, or a 401
that echoes the caller's API key (to prove the harness never stores it). `/stats` reports
requests, faults and the most requests ever in flight.

A request with `"stream": true` is answered as the real service streams it, as server-sent
events over chunked transfer encoding: OpenAI `chat.completion.chunk`s (text and tool-call
arguments split over several deltas, a usage chunk with `stream_options.include_usage`, then
`data: [DONE]`), or Anthropic's `message_start` ... `message_stop` events. A stream is the body
the same request gets unstreamed, cut into pieces, so both carry the same content, tool-call ids
and usage; faults apply before it starts. So an app that streams can be served and recorded too.

Run it: `harness fake-server --port 8000 --latency 0.05 --fail-429 0.1`.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from harness.models import wire_anthropic, wire_openai
from harness.models.base import ModelError
from harness.models.scripted import ScriptedModel
from harness.specs.script import Script
from harness.testing.sse import BROKEN_EVENT, Stream, anthropic_events, openai_events, send_stream
from harness.transcript import Message, Usage

# An agent service in a test: the conversation in, the assistant's message out.
Responder = Callable[[list[Message]], Awaitable[Message]]
ECHO_SCRIPT = Script.model_validate(
    {
        "kind": "script",
        "rules": [{"when": {"matches": "(?s).+"}, "reply": "echo: {m.0}"}, {"reply": "OK"}],
    }
)


@dataclass
class Faults:
    """Rates (0-1) of injected faults per request, drawn from a seeded generator."""

    rate_429: float = 0.0
    rate_500: float = 0.0
    rate_hang: float = 0.0
    rate_malformed: float = 0.0
    rate_401_echo: float = 0.0
    retry_after_s: float = 0.05
    seed: int = 0

    def draw(self, rng: random.Random) -> str | None:
        roll = rng.random()
        for name, rate in (
            ("429", self.rate_429),
            ("500", self.rate_500),
            ("hang", self.rate_hang),
            ("malformed", self.rate_malformed),
            ("401_echo", self.rate_401_echo),
        ):
            if roll < rate:
                return name
            roll -= rate
        return None


class FakeServer:
    """The server. Use `running()` to serve from a background thread in tests."""

    def __init__(
        self,
        script: Script | None = None,
        latency_s: float = 0.0,
        faults: Faults | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        echo_auth: bool = False,
        responder: Responder | None = None,
    ):
        self.model = ScriptedModel(script or ECHO_SCRIPT, name="fake")
        self.responder = responder
        self.latency_s = latency_s
        self.faults = faults or Faults()
        self.host, self.port = host, port
        self.echo_auth = echo_auth
        self._rng = random.Random(self.faults.seed)
        self.stats: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self.requests: list[dict[str, Any]] = []  # the last request bodies, newest last
        self._server: asyncio.AbstractServer | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._connection, self.host, self.port, backlog=1024
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def serve_forever(self) -> None:
        await self.start()
        assert self._server is not None
        await self._server.serve_forever()

    @contextmanager
    def running(self) -> Iterator[FakeServer]:
        """Serve from a background thread until the block ends."""
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(self.start())
            ready.set()
            loop.run_forever()

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        ready.wait(10)
        try:
            yield self
        finally:
            asyncio.run_coroutine_threadsafe(self.stop(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()

    async def stop(self) -> None:
        """Stop listening and drop every open connection."""
        if self._server is not None:
            self._server.close()
        current = asyncio.current_task()
        tasks = [task for task in asyncio.all_tasks() if task is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def snapshot(self) -> dict[str, Any]:
        return {
            "requests": self.stats["requests"],
            "max_in_flight": self.max_in_flight,
            "faults": {
                k.removeprefix("fault:"): v for k, v in self.stats.items() if k.startswith("fault:")
            },
        }

    # ------------------------------------------------------------ HTTP

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request_line = await reader.readline()
                if not request_line.strip():
                    break
                method, path, _ = request_line.decode("latin-1").split(" ", 2)
                headers: dict[str, str] = {}
                while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    key, _, value = line.decode("latin-1").partition(":")
                    headers[key.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length") or 0))
                response = await self._handle(method, path.split("?")[0], headers, body, reader)
                if response is None:
                    break  # a hung connection the client gave up on
                if isinstance(response, Stream):
                    await send_stream(writer, response)
                else:
                    writer.write(response)
                    await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client left, or the server is stopping
        finally:
            writer.close()

    async def _handle(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes,
        reader: asyncio.StreamReader,
    ) -> bytes | Stream | None:
        if method == "GET" and path == "/stats":
            return _http(200, self.snapshot())
        if method == "POST" and path == "/reset":
            self.stats.clear()
            self.max_in_flight = 0
            self.requests.clear()
            return _http(200, {"ok": True})
        protocol = {
            "/v1/chat/completions": "openai",
            "/chat/completions": "openai",
            "/v1/messages": "anthropic",
            "/messages": "anthropic",
        }.get(path)
        if method != "POST" or protocol is None:
            return _http(404, {"error": {"message": f"no route {method} {path}"}})
        self.stats["requests"] += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        loop = asyncio.get_running_loop()
        due = loop.time() + self.latency_s
        try:
            response = await self._answer(protocol, headers, body)
            # The latency counts from the request's arrival, as a provider's does: the server's
            # own work (parsing, the script, the reply) is inside it, not added to it.
            await asyncio.sleep(max(0.0, due - loop.time()))
            if response is None:
                await reader.read()  # a hung connection: until the client hangs up
            return response
        finally:
            self.in_flight -= 1

    async def _answer(
        self, protocol: str, headers: dict[str, str], body: bytes
    ) -> bytes | Stream | None:
        """The response to a model call, a drawn fault's included; None for a hung connection."""
        fault = self.faults.draw(self._rng)
        if fault:
            self.stats[f"fault:{fault}"] += 1
        if fault == "hang":
            return None
        if fault == "429":
            return _http(
                429,
                {"error": {"message": "rate limited", "type": "rate_limit"}},
                {"retry-after": f"{self.faults.retry_after_s:g}"},
            )
        if fault == "500":
            return _http(500, {"error": {"message": "internal error", "type": "server"}})
        if fault == "malformed" and _wants_stream(body):
            return Stream([BROKEN_EVENT[protocol]])
        if fault == "malformed":
            return _raw(200, b'{"id": "x", "choices": [{"message": ')
        if fault == "401_echo":
            return _http(
                401,
                {
                    "error": {
                        "message": f"bad credentials {_auth(headers)}",
                        "type": "authentication_error",
                    }
                },
            )
        request = json.loads(body)
        self.requests = [*self.requests[-99:], {"protocol": protocol, **request}]
        try:
            reply = await self._reply(protocol, request, headers)
        except ModelError as exc:
            return _http(400, {"error": {"message": str(exc), "type": "invalid_request"}})
        if request.get("stream") is not True:
            return _http(200, reply)
        if protocol == "openai":
            options = request.get("stream_options") or {}
            return Stream(openai_events(reply, bool(options.get("include_usage"))))
        return Stream(anthropic_events(reply))

    async def _reply(
        self, protocol: str, request: dict[str, Any], headers: dict[str, str]
    ) -> dict[str, Any]:
        """The non-streamed response body; a stream is this body cut into events."""
        wire = wire_openai if protocol == "openai" else wire_anthropic
        if protocol == "openai":
            messages = wire_openai.from_wire_messages(request["messages"])
        else:
            messages = wire_anthropic.from_wire(request.get("system"), request["messages"])
        if self.responder is not None:
            message = await self.responder(messages)
        else:
            message = self.model.reply(messages)
        if self.echo_auth:
            message.content = f"{message.content} [seen {_auth(headers)}]"
        words_in = sum(len(m.content.split()) for m in messages)
        usage = Usage(calls=1, input_tokens=words_in, output_tokens=len(message.content.split()))
        number = self.stats["requests"]
        return wire.response_body(message, usage, request.get("model", "fake"), f"fake-{number}")


def _auth(headers: dict[str, str]) -> str:
    return headers.get("authorization") or headers.get("x-api-key") or ""


def _http(status: int, payload: Any, extra: dict[str, str] | None = None) -> bytes:
    return _raw(status, json.dumps(payload).encode(), extra)


def _wants_stream(body: bytes) -> bool:
    try:
        request = json.loads(body)
    except ValueError:
        return False
    return isinstance(request, dict) and request.get("stream") is True


def _raw(status: int, body: bytes, extra: dict[str, str] | None = None) -> bytes:
    head = [
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
        "content-type: application/json",
        f"content-length: {len(body)}",
    ]
    head += [f"{k}: {v}" for k, v in (extra or {}).items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body

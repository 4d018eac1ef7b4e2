"""`harness fake-server`: an OpenAI- and Anthropic-compatible server of scripted replies, streamed
when the request asks (`"stream": true`), with injected faults, for trying providers, retries and
streaming apps without a real service."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer

from harness.cli._common import user_errors


def fake_server(
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port on 127.0.0.1 (0 picks a free one).")
    ] = 8000,
    script: Annotated[
        Path | None, typer.Option(help="Rules file of replies (default: echo).")
    ] = None,
    latency: Annotated[
        float,
        typer.Option(
            min=0, help="Seconds from a request's arrival to its reply (the server's work within)."
        ),
    ] = 0.0,
    fail_429: Annotated[float, typer.Option(min=0, max=1, help="Rate of 429 replies.")] = 0.0,
    fail_500: Annotated[float, typer.Option(min=0, max=1, help="Rate of 500 replies.")] = 0.0,
    hang: Annotated[float, typer.Option(min=0, max=1, help="Rate of hung connections.")] = 0.0,
    malformed: Annotated[float, typer.Option(min=0, max=1, help="Rate of broken JSON.")] = 0.0,
    retry_after: Annotated[float, typer.Option(min=0, help="Retry-After of a 429.")] = 0.05,
    seed: Annotated[int, typer.Option(help="Seed of the fault draws.")] = 0,
) -> None:
    """Serve scripted replies over the OpenAI and Anthropic wire protocols, streamed or not, with
    faults."""
    import asyncio

    from harness.specs.load import load_script
    from harness.testing.fake_server import FakeServer, Faults

    with user_errors():
        rules = load_script(script).spec if script else None
    faults = Faults(
        rate_429=fail_429,
        rate_500=fail_500,
        rate_hang=hang,
        rate_malformed=malformed,
        retry_after_s=retry_after,
        seed=seed,
    )
    server = FakeServer(rules, latency_s=latency, faults=faults, port=port)

    async def serve() -> None:
        await server.start()
        typer.echo(f"serving OpenAI and Anthropic protocols at {server.url}", err=True)
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())

"""Throughput and CPU cost of model calls through the harness's `openai/` provider, against the
bare `openai` client under a plain semaphore, both measured here in the same run.

The fake server runs in its own process (`harness fake-server`) so that only the client's CPU is
counted. For each setting it prints the achieved time, the ideal time (calls x latency /
concurrency), their ratio (efficiency) and the client's CPU milliseconds per call.

Run: python bench/model_calls.py [calls]
Targets: efficiency >= 0.9 at (b); at (a) harness CPU per call <= 1.25 x the bare client's.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENAI_API_KEY", "bench-not-a-real-key")

from harness.models import CallPolicy, CompletionParams, ModelRuntime, ResponseCache
from harness.transcript import Message

SETTINGS = {"a": (0.05, 100), "b": (0.2, 20)}


def start_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "harness", "fake-server", "--port", "0", "--latency", str(latency)],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    url = process.stderr.readline().strip().rsplit(" ", 1)[-1]
    return process, url


async def bare(url: str, calls: int, concurrency: int) -> None:
    import openai

    client = openai.AsyncOpenAI(base_url=f"{url}/v1", max_retries=0, timeout=60)
    limit = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with limit:
            await client.chat.completions.create(
                model="fake",
                messages=[{"role": "user", "content": f"call {i}"}],
                max_tokens=64,
                temperature=0,
            )

    await asyncio.gather(*(one(i) for i in range(calls)))
    await client.close()


async def harness(url: str, calls: int, concurrency: int, cache: Path | None) -> None:
    runtime = ModelRuntime(
        cache=ResponseCache(cache) if cache else None, policy=CallPolicy(timeout_s=60)
    )
    model = runtime.model(
        {"id": "openai/fake", "base_url": f"{url}/v1", "max_concurrency": concurrency}, "agent"
    )
    params = CompletionParams(max_tokens=64)

    async def one(i: int) -> None:
        await model.complete([Message(role="user", content=f"call {i}")], [], params)

    await asyncio.gather(*(one(i) for i in range(calls)))
    await runtime.aclose()
    runtime.close()


def measure(run, calls: int) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    asyncio.run(run)
    return time.perf_counter() - wall, (time.process_time() - cpu) * 1000 / calls


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    print(f"{calls} calls per measurement; server in its own process")
    header = f"{'setting':<34} {'time s':>7} {'ideal s':>8} {'effic.':>7} {'CPU ms/call':>12}"
    for name, (latency, concurrency) in SETTINGS.items():
        server, url = start_server(latency)
        try:
            ideal = calls * latency / concurrency
            print(f"\n({name}) latency {latency * 1000:.0f} ms, concurrency {concurrency}")
            print(header)
            asyncio.run(bare(url, 50, concurrency))  # warm up both sides
            results = {}
            with tempfile.TemporaryDirectory() as folder:
                runs = {
                    "bare openai client + semaphore": bare(url, calls, concurrency),
                    "harness openai/ provider": harness(url, calls, concurrency, None),
                    "harness openai/ + response cache": harness(
                        url, calls, concurrency, Path(folder) / "cache.db"
                    ),
                }
                for label, run in runs.items():
                    seconds, cpu_ms = measure(run, calls)
                    results[label] = cpu_ms
                    print(
                        f"{label:<34} {seconds:7.2f} {ideal:8.2f} {ideal / seconds:7.2f} "
                        f"{cpu_ms:12.2f}"
                    )
            ratio = results["harness openai/ provider"] / results["bare openai client + semaphore"]
            print(f"harness CPU per call / bare client CPU per call: {ratio:.2f}")
        finally:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()

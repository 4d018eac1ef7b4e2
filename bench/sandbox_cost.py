"""What a python check costs in each sandbox backend, against the interpreter's own start.

Baseline, measured in the same run: starting `python -I -S -c pass` as a subprocess (what any
out-of-process checker pays). Then `run_checker` on a checker that reads a transcript, under
bubblewrap (with its per-check cgroup where one can be made) and the unisolated subprocess,
one at a time and 8 at once. Prints seconds per check and the ratio to the baseline.

    python bench/sandbox_cost.py [--checks 40]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time

from harness.grading.sandbox import SandboxLimits, run_checker
from harness.grading.sandbox.local import bwrap_available

CODE = "def check(t):\n    return any('refund' in m['content'] for m in t['messages'])"
TRANSCRIPT = {"messages": [{"role": "user", "content": f"message {n} refund"} for n in range(200)]}
LIMITS = SandboxLimits()


def baseline(checks: int) -> float:
    times = []
    for _ in range(checks):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def one_at_a_time(backend: str, checks: int) -> tuple[float, str]:
    times, how = [], ""
    for _ in range(checks):
        start = time.perf_counter()
        result = await run_checker(CODE, "check", [TRANSCRIPT], LIMITS, backend=backend)
        times.append(time.perf_counter() - start)
        assert result.ok and result.value is True, result.error
        how = result.limits
    return statistics.median(times), how


async def eight_at_once(backend: str, checks: int) -> float:
    start = time.perf_counter()
    for _ in range(max(checks // 8, 1)):
        await asyncio.gather(
            *(run_checker(CODE, "check", [TRANSCRIPT], LIMITS, backend=backend) for _ in range(8))
        )
    return (time.perf_counter() - start) / (max(checks // 8, 1) * 8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=40)
    checks = parser.parse_args().checks
    base = baseline(checks)
    print(f"baseline: python start {base * 1000:.1f} ms")
    backends = ["bwrap", "subprocess"] if bwrap_available() else ["subprocess"]
    for backend in backends:
        single, how = asyncio.run(one_at_a_time(backend, checks))
        batch = asyncio.run(eight_at_once(backend, checks))
        print(
            f"{backend:10} ({how}): {single * 1000:.1f} ms per check ({single / base:.2f}x), "
            f"8 at once {batch * 1000:.1f} ms per check ({batch / base:.2f}x)"
        )


if __name__ == "__main__":
    main()

"""100,000 Weave calls in a JSONL export turned into regression tasks: calls per second and
peak memory. The calls are streamed (staged on disk by thread), never loaded whole.

The export mixes the shapes the converter reads: agents instrumented with `@weave.op` (a turn
call with tool calls below it) and autopatched OpenAI calls; 20% of the sessions crash, 10% get
a thumbs-down with a note, and most of them repeat a handful of failure signatures.

Run: python bench/traces_convert.py [calls]
"""

from __future__ import annotations

import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def session(n: int, rng: random.Random) -> list[dict]:
    """One production session: 2 to 8 calls."""
    order = f"O-{rng.randint(1000, 1006)}"
    thread, trace = f"s-{n}", f"t-{n}"
    clock = f"2026-11-{1 + n % 28:02d}T{n % 24:02d}:{n % 60:02d}:00"

    def call(
        call_id: str,
        op: str,
        inputs: dict,
        output=None,
        parent=None,
        kind=None,
        exception=None,
        feedback=None,
    ) -> dict:
        return {
            "id": call_id,
            "project_id": "acme/support",
            "op_name": f"weave:///acme/support/op/{op}:v1",
            "trace_id": trace,
            "parent_id": parent,
            "thread_id": thread,
            "started_at": clock,
            "inputs": inputs,
            "output": output,
            "exception": exception,
            "attributes": {"weave": {"kind": kind}} if kind else {},
            "summary": {"usage": {"gpt-4.1-mini": {"prompt_tokens": 300}}},
            "feedback": feedback or [],
        }

    if n % 3 == 2:  # an autopatched OpenAI conversation
        messages = [
            {"role": "system", "content": "You are the support agent."},
            {"role": "user", "content": f"Where is my order {order}?"},
        ]
        return [
            call(
                f"{n}-llm",
                "openai.chat.completions.create",
                {"model": "gpt-4.1-mini", "messages": messages},
                {
                    "choices": [
                        {"message": {"role": "assistant", "content": f"{order} has shipped."}}
                    ]
                },
            )
        ]
    roll = rng.random()
    said = [{"role": "user", "content": f"Please refund order {order}."}]
    crash = json.dumps({"type": "KeyError", "message": f"'tracking' for {order}"})
    feedback = [
        {"feedback_type": "wandb.reaction.1", "payload": {"emoji": "👎"}},
        {
            "feedback_type": "wandb.note.1",
            "payload": {"note": f"Refunded {order} outside the window."},
        },
    ]
    calls = [
        call(
            f"{n}-turn",
            "handle_turn",
            {"conversation": said},
            None if roll < 0.2 else "Refund issued.",
            kind="agent",
            exception=crash if roll < 0.2 else None,
            feedback=feedback if 0.2 <= roll < 0.3 else None,
        )
    ]
    for step, tool in enumerate(("get_order", "issue_refund")[: rng.randint(1, 2)]):
        calls.append(
            call(
                f"{n}-tool{step}",
                f"Backend.{tool}",
                {"order_id": order},
                {"order_id": order, "status": "delivered", "amount": 59.0},
                parent=f"{n}-turn",
                kind="tool",
            )
        )
    return calls


def make_export(path: Path, calls: int) -> int:
    rng = random.Random(1)
    written = n = 0
    with path.open("w") as out:
        while written < calls:
            for record in session(n, rng):
                out.write(json.dumps(record) + "\n")
                written += 1
            n += 1
    return n


def convert(export: Path, out: Path) -> None:
    """The measured part (run in a child process so that its peak memory is its own)."""
    from harness.production.calls import Filters, read_jsonl
    from harness.production.clusters import cluster
    from harness.production.convert import TaskOptions, write_tasks
    from harness.production.reconstruct import conversations

    started, cpu = time.perf_counter(), time.process_time()
    problems: list = []
    left_out: list[str] = []  # sessions of unknown quality: no success task
    clusters = cluster(
        conversations(read_jsonl(export, Filters(), problems), problems), left_out=left_out
    )
    written = write_tasks(clusters, out, TaskOptions())  # the `replay` domain
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    conversations_seen = sum(c.count for c in clusters.values())
    print(
        json.dumps(
            {
                "wall_s": wall,
                "cpu_s": cpu,
                "peak_mb": peak,
                "tasks": len(written.made),
                "conversations": conversations_seen,
                "unreadable": len(problems),
                "left_out": left_out,
            }
        )
    )


def main() -> None:
    if len(sys.argv) > 3 and sys.argv[1] == "--child":
        convert(Path(sys.argv[2]), Path(sys.argv[3]))
        return
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory() as folder:
        export = Path(folder) / "calls.jsonl"
        sessions = make_export(export, calls)
        size = export.stat().st_size / 1e6
        done = subprocess.run(
            [sys.executable, __file__, "--child", str(export), str(Path(folder) / "tasks")],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            sys.exit(done.stderr)
        result = json.loads(done.stdout.strip().splitlines()[-1])
    print(
        f"{calls} calls ({sessions} sessions, {size:.0f} MB of JSONL) -> "
        f"{result['conversations']} conversations in tasks -> {result['tasks']} tasks "
        f"({result['unreadable']} unreadable)"
    )
    for line in result["left_out"]:
        print(line)
    print(
        f"calls per second: {calls / result['wall_s']:,.0f} "
        f"(wall {result['wall_s']:.1f} s, CPU {result['cpu_s']:.1f} s)"
    )
    print(f"peak memory: {result['peak_mb']:.0f} MB")


if __name__ == "__main__":
    main()

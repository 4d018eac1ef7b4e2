"""What one accepted improvement costs: the scripted climb demo (climbs/refund-window.yaml) run
in a scratch copy of the bundled folders, with episodes and model calls spent, the wall time
split between simulation, grading and reflection, and the overhead of one candidate evaluation:
its wall time beyond playing and grading its episodes (building the candidate, reaching the
store, the runtime and the event loop, scoring it). Every evaluation runs in the climb's one
session, so this is a few milliseconds; the climb that ran a pipeline per evaluation (writing
the candidate's file, loading the tasks, opening the store) spent 200-310 ms on this machine.

Run: python bench/climb_cost.py
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def model_calls(store: Path) -> int:
    """Agent and simulated-user model calls of every stored episode."""
    import json

    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT usage FROM episodes").fetchall()
    return sum(json.loads(u)["agent"]["calls"] + json.loads(u)["user"]["calls"] for (u,) in rows)


def timed_evaluations() -> list[float]:
    """Wall time of every candidate evaluation the climb makes (its adapter's `play`)."""
    from harness.climb.adapter import HarnessAdapter

    times: list[float] = []
    play = HarnessAdapter.play

    def timed(self: HarnessAdapter, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return play(self, *args, **kwargs)
        finally:
            times.append(time.perf_counter() - started)

    HarnessAdapter.play = timed  # type: ignore[method-assign]
    return times


def main() -> None:
    os.environ.setdefault("WANDB_MODE", "disabled")
    os.environ.setdefault("WANDB_DISABLE_WEAVE", "true")
    from harness.climb import run_climb
    from harness.pipeline.runner import RunOptions
    from harness.specs.load import load_climb

    evaluations = timed_evaluations()
    with tempfile.TemporaryDirectory() as scratch:
        for folder in ("tasks", "personas", "agents", "ci", "climbs"):
            shutil.copytree(ROOT / folder, Path(scratch) / folder)
        os.chdir(scratch)
        started = time.perf_counter()
        options = RunOptions(traces=None, progress=False)
        outcome = run_climb(load_climb(Path("climbs/refund-window.yaml")), options)
        wall = time.perf_counter() - started
        calls = model_calls(Path(".harness/results.db"))
    found = outcome.search
    accepted = 1 if outcome.acceptance.accepted else 0
    seconds = found.adapter.seconds
    simulate, grade = seconds.get("simulate", 0.0), seconds.get("grade", 0.0)
    reflect = found.reflection.seconds
    per = (lambda n: f"{n / accepted:.0f}") if accepted else (lambda n: "n/a (none accepted)")
    print(f"accepted improvements      {accepted}")
    print(f"candidates proposed        {found.candidates}")
    print(f"episodes (search)          {found.episodes}  per improvement {per(found.episodes)}")
    print(f"model calls (all episodes) {calls}  per improvement {per(calls)}")
    print(f"reflection calls           {found.reflection.calls}")
    print(f"wall time                  {wall:.1f} s")
    for name, part in (("simulation", simulate), ("grading", grade), ("reflection", reflect)):
        print(f"  {name:<24} {part:6.1f} s  {part / wall:5.1%}")
    other = wall - simulate - grade - reflect
    print(f"  {'other (loading, gate)':<24} {other:6.1f} s  {other / wall:5.1%}")
    # What an evaluation costs beyond playing and grading its episodes: building and loading
    # the candidate, opening what it runs on, reading its scores.
    overhead = sum(evaluations) - simulate - grade
    count = max(len(evaluations), 1)
    each = sum(evaluations) / count * 1e3
    print(f"evaluations                {len(evaluations)}  {each:.0f} ms each")
    print(f"per-evaluation overhead    {overhead / count * 1e3:.1f} ms")


if __name__ == "__main__":
    main()

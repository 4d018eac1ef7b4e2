"""What one accepted improvement costs: the scripted climb demo (climbs/refund-window.yaml) run
in a scratch copy of the bundled folders, with episodes and model calls spent and the wall time
split between simulation, grading and reflection.

Run: python bench/climb_cost.py
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def model_calls(store: Path) -> int:
    """Agent and simulated-user model calls of every stored episode."""
    import json

    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT usage FROM episodes").fetchall()
    return sum(json.loads(u)["agent"]["calls"] + json.loads(u)["user"]["calls"] for (u,) in rows)


def main() -> None:
    os.environ.setdefault("WANDB_MODE", "disabled")
    os.environ.setdefault("WANDB_DISABLE_WEAVE", "true")
    from harness.climb import run_climb
    from harness.pipeline.runner import RunOptions
    from harness.specs.load import load_climb

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


if __name__ == "__main__":
    main()

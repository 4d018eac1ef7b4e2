"""10,000 episodes with the scripted model through the whole pipeline (load tasks, simulate,
grade, store, report), once with tracing off and once into the local Weave trace store.

Each mode runs in its own process, so that peak RSS and CPU are its own. Prints episodes per
second, CPU milliseconds per model call (agent and simulated user, every stage included) and
peak RSS. Targets: peak RSS under 300 MB; CPU per model call at most 1 ms with tracing off and
at most 4 ms with tracing on.

Run: python bench/pipeline_scale.py [episodes]
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = [
    "order-status",
    "refund-delivered",
    "cancel-processing",
    "order-status-processing",
    "cancel-shipped",
]
TASKS_PER_TEMPLATE = 10


def make_suite(folder: Path) -> Path:
    """50 rule-checked tasks (copies of bundled ones under new ids), personas and agents."""
    import yaml

    shutil.copytree(ROOT / "personas", folder / "personas")
    shutil.copytree(ROOT / "agents", folder / "agents")
    tasks = folder / "tasks"
    (tasks / "data").mkdir(parents=True)
    shutil.copy(ROOT / "tasks/support/data/desk.json", tasks / "data/desk.json")
    for name in TEMPLATES:
        task = yaml.safe_load((ROOT / f"tasks/support/{name}.yaml").read_text())
        task["checks"] = [c for c in task["checks"] if c["kind"] not in ("python", "llm_judge")]
        task["start"]["state_file"] = "data/desk.json"
        for copy in range(TASKS_PER_TEMPLATE):
            task["id"] = f"{name}-{copy}"
            (tasks / f"{task['id']}.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    return folder


def run_mode(folder: Path, episodes: int, traced: bool) -> dict[str, float]:
    """One measurement, in this process (the parent runs each mode in a child)."""
    os.chdir(folder)
    from harness.pipeline.runner import RunOptions, run_pipeline, with_overrides
    from harness.pipeline.templates import RUN_EVAL_SHORTCUTS, flags_dag
    from harness.specs.agent import ModelRef
    from harness.store import Store

    tasks = len(TEMPLATES) * TASKS_PER_TEMPLATE
    data = flags_dag(
        [Path("tasks")],
        Path("agents/support-baseline.yaml"),
        None,
        trials=episodes // tasks,
        concurrency=32,
        judge_model=ModelRef(id="local/none"),
    )
    data["nodes"].pop("wandb")
    data = with_overrides(
        data,
        {},
        ["agent.model={id: scripted, script: agents/scripts/support.yaml}"],
        RUN_EVAL_SHORTCUTS,
    )
    options = RunOptions(
        store=Path("results.db"),
        cache=None,
        traces=Path("traces.db") if traced else None,
        progress=False,
    )
    cpu, wall = time.process_time(), time.perf_counter()
    outcome = run_pipeline(data, {}, Path("bench"), options)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert not outcome.execution.failed, outcome.execution.statuses
    store = Store(Path("results.db"))
    [run] = store.runs()
    calls = played = 0
    for row in store.episode_rows(run.id):
        calls += row.usage.calls + row.user_usage.calls
        played += 1
    store.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"episodes": played, "calls": calls, "wall_s": wall, "cpu_s": cpu, "peak_mb": peak}


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        folder, episodes, traced = Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "on"
        print(json.dumps(run_mode(folder, episodes, traced)))
        return
    episodes = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    env = {
        **os.environ,
        "WANDB_MODE": "disabled",
        "WANDB_DISABLE_WEAVE": "true",
        "WANDB_ERROR_REPORTING": "false",
    }
    print(
        f"{episodes} episodes of {len(TEMPLATES) * TASKS_PER_TEMPLATE} tasks, scripted agent "
        "and users, rule checks, concurrency 32"
    )
    print(
        f"{'tracing':<10} {'episodes/s':>10} {'model calls':>12} {'CPU ms/call':>12} "
        f"{'peak RSS MB':>12}"
    )
    for mode in ("off", "on"):
        with tempfile.TemporaryDirectory() as tmp:
            folder = make_suite(Path(tmp))
            done = subprocess.run(
                [sys.executable, __file__, "--child", str(folder), str(episodes), mode],
                capture_output=True,
                text=True,
                env=env,
                check=False,
            )
            if done.returncode:
                sys.exit(done.stderr)
            result = json.loads(done.stdout.strip().splitlines()[-1])
        per_call = result["cpu_s"] * 1000 / result["calls"]
        print(
            f"{mode:<10} {result['episodes'] / result['wall_s']:>10.1f} "
            f"{result['calls']:>12} {per_call:>12.3f} {result['peak_mb']:>12.1f}"
        )


if __name__ == "__main__":
    main()

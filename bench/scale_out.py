"""Episodes per second on the local executor and on 1 and 2 Ray workers, against the fake model
server at 200 ms latency, with CPU-bound work in every episode.

The bundled support suite is played by the support agent's rules served over HTTP by
`harness fake-server --latency 0.2` (in its own process), so each agent call waits 200 ms; every
episode's environment also burns ~50 ms of CPU as it starts (a stand-in for tool code, rule
checks and embedded models), the part that shares one core on the local executor. Each setting
runs the whole pipeline (load, simulate, grade with the tasks' checks, report) into a fresh
store with no response cache; it prints the simulate node's episodes per second (where
executors differ) and the pipeline's, and their ratio to the local executor. On Ray, a warm-up
run starts the workers first (their start is not counted). Ray is started in this process with
the CPUs the machine has; the script prints how many it saw.

Run: python bench/scale_out.py [trials]   (22 tasks x trials episodes per setting; default 6)
Expect at most about 2x on 2 CPUs: the driver (store, grading) shares them with the workers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENAI_API_KEY", "bench-not-a-real-key")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.update(WANDB_MODE="disabled", WANDB_DISABLE_WEAVE="true", WANDB_SILENT="true")

ROOT = Path(__file__).resolve().parents[1]
LATENCY_S = 0.2
BURN_S = 0.05
CONCURRENCY = 16  # episodes at once: in the process, or on each Ray worker
BURNING_DOMAIN = f'''
import time

from harness.domains.support import SupportDesk


class BurningDesk(SupportDesk):
    """The support desk, whose every environment burns {BURN_S * 1000:.0f} ms of CPU first."""

    def __init__(self, state):
        end = time.thread_time() + {BURN_S}
        while time.thread_time() < end:
            pass
        super().__init__(state)
'''


def start_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    script = ROOT / "agents/scripts/support.yaml"
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "harness", "fake-server", "--port", "0"),
            *("--latency", str(latency), "--script", str(script)),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    url = process.stderr.readline().strip().rsplit(" ", 1)[-1]
    return process, url


def run(folder: Path, url: str, trials: int, executor: str, workers: int | None, limit=None):
    """One pipeline into a fresh store: (episodes, simulate seconds, pipeline seconds)."""
    from harness.pipeline.runner import RunOptions, run_pipeline, with_overrides
    from harness.pipeline.templates import RUN_EVAL_SHORTCUTS, flags_dag
    from harness.specs.agent import ModelRef

    selection = {"limit": limit} if limit else None
    data = flags_dag(
        [ROOT / "tasks/support"],
        ROOT / "agents/support-baseline.yaml",
        None,
        trials=trials,
        concurrency=CONCURRENCY,
        judge_model=ModelRef(id="scripted", script=str(ROOT / "agents/scripts/judge.yaml")),
        selection=selection,
    )
    data["nodes"].pop("wandb")
    model = f"{{id: openai/fake, base_url: '{url}/v1', max_concurrency: 64}}"
    overrides = [f"agent.model={model}", f"task.domain={folder / 'burning.py'}:BurningDesk"]
    data = with_overrides(data, {}, overrides, RUN_EVAL_SHORTCUTS)
    store = folder / f"results-{time.monotonic_ns()}.db"
    options = RunOptions(
        store=store, cache=None, traces=None, progress=False, executor=executor, workers=workers
    )
    started = time.perf_counter()
    outcome = run_pipeline(data, {}, Path("bench"), options)
    wall = time.perf_counter() - started
    assert not outcome.execution.failed, outcome.execution.statuses
    simulate = outcome.execution.statuses["simulate"]
    episodes = outcome.execution.outputs["simulate"].episodes
    return episodes, simulate.finished - simulate.started, wall


def main() -> None:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    os.chdir(ROOT)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(
        f"CPUs seen: {cpus} (os.cpu_count {os.cpu_count()}); fake server latency "
        f"{LATENCY_S * 1000:.0f} ms; {BURN_S * 1000:.0f} ms CPU per episode; "
        f"{CONCURRENCY} episodes at once per process or worker"
    )
    server, url = start_server(LATENCY_S)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            (folder / "burning.py").write_text(BURNING_DOMAIN)
            settings = [("local", None), ("ray", 1), ("ray", 2)]
            header = (
                f"{'executor':<16} {'episodes':>8} {'simulate s':>10} {'episodes/s':>10} "
                f"{'vs local':>8} {'pipeline s':>10} {'episodes/s':>10} {'vs local':>8}"
            )
            print(header)
            base: tuple[float, float] | None = None
            for executor, workers in settings:
                if executor == "ray":
                    started = time.perf_counter()
                    run(folder, url, 1, executor, workers, limit=2)  # start the workers
                    warm = time.perf_counter() - started
                episodes, simulate_s, wall = run(folder, url, trials, executor, workers)
                rates = (episodes / simulate_s, episodes / wall)
                base = base or rates
                label = "local" if workers is None else f"ray, {workers} worker(s)"
                print(
                    f"{label:<16} {episodes:>8} {simulate_s:>10.2f} {rates[0]:>10.1f} "
                    f"{rates[0] / base[0]:>7.2f}x {wall:>10.2f} {rates[1]:>10.1f} "
                    f"{rates[1] / base[1]:>7.2f}x"
                )
                if executor == "ray":
                    print(f"{'':<16} (workers started in {warm:.1f} s, not counted)")
            import ray

            ray_cpus = int(ray.cluster_resources().get("CPU", 0))
            print(f"Ray saw {ray_cpus} CPUs")
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()

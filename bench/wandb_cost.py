"""What logging to W&B costs a one-task `harness run-eval`: the median wall of the command with
`WANDB_MODE=offline` against the same with `WANDB_MODE=disabled` (the baseline, measured in the
same run, interleaved), and their ratio (issue 42: the offline run used to be written by a child
the command waited for at exit, ~1.9 s).

The W&B run is written by a detached child after the command's node: between repeats the bench
waits for it (untimed: the pending payload files in the W&B folder gone), so one repeat's writer
does not share the machine's cores with the next repeat's command.

Run: python bench/wandb_cost.py [repeats]
Last line: wandb_extra_s=X offline_s=Y disabled_s=Z ratio=R
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.api.pipeline import finish_wandb_runs

ROOT = Path(__file__).resolve().parents[1]
ENV = {
    "WANDB_DISABLE_WEAVE": "true",
    "WANDB_ERROR_REPORTING": "false",
    "RAY_USAGE_STATS_ENABLED": "0",
}


def one_task(folder: Path, mode: str, index: int) -> float:
    """Wall seconds of a one-task run-eval (scripted agent, fresh store) in a W&B mode; then
    waits, untimed, for the run's W&B writer."""
    wandb_dir = folder / f"wandb-{mode}-{index}"
    args = [
        sys.executable,
        "-m",
        "harness",
        "run-eval",
        "--tasks",
        "tasks/support/order-status.yaml",
        "--agent",
        "agents/support-baseline.yaml",
        "--set",
        "agent.model={id: scripted, script: agents/scripts/support.yaml}",
        "--set",
        f"wandb.dir={wandb_dir}",
        "--store",
        str(folder / f"{mode}-{index}.db"),
        "--no-traces",
    ]
    env = {**os.environ, **ENV, "WANDB_MODE": mode}
    start = time.perf_counter()
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"run-eval failed ({mode}):\n{done.stderr}")
    if finish_wandb_runs(wandb_dir).pending:
        raise SystemExit(f"the W&B writer of the {mode} run did not finish")
    return wall


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    walls: dict[str, list[float]] = {"disabled": [], "offline": []}
    with tempfile.TemporaryDirectory(prefix="wandb-cost-") as tmp:
        one_task(Path(tmp), "offline", -1)  # warm the disk cache, untimed
        for index in range(repeats):
            for mode in walls:
                walls[mode].append(one_task(Path(tmp), mode, index))
    offline, disabled = (statistics.median(walls[mode]) for mode in ("offline", "disabled"))
    for mode, samples in walls.items():
        print(
            f"{mode:>9}: median {statistics.median(samples):.2f} s  "
            f"({', '.join(f'{s:.2f}' for s in samples)})"
        )
    print(f"W&B offline costs {offline - disabled:+.2f} s, {offline / disabled:.2f}x disabled")
    print(
        f"wandb_extra_s={offline - disabled:.2f} offline_s={offline:.2f} "
        f"disabled_s={disabled:.2f} ratio={offline / disabled:.2f}"
    )


if __name__ == "__main__":
    main()

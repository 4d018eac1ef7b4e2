"""What an offline W&B run directory holds, read with wandb's own reader (`wandb leet
inspect`), for the tests of the `log_wandb` node."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def records(run_dir: Path) -> tuple[dict, dict]:
    """The summary and configuration an offline run directory holds, as `wandb` reads them."""
    lines = subprocess.run(
        [str(Path(sys.executable).with_name("wandb")), "leet", "inspect", "--json", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()
    summary: dict = {}
    config: dict = {}
    for record in map(json.loads, lines):
        if record["type"] == "summary":
            summary.update(record["summary"]["update"])
        if record["type"] == "run":
            config = record["run"]["config"]["update"]
    return summary, config

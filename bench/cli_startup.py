"""How long `harness --help` and `harness validate` of the bundled folders take, against bare
`python -c pass` (issue 18's target for the validate: 0.5 s).

Run: python bench/cli_startup.py [repeats]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(args: list[str], repeats: int) -> float:
    """Median wall seconds of a command."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(args, cwd=ROOT, capture_output=True, check=False)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    baseline = timed([sys.executable, "-c", "pass"], repeats)
    cases = {
        "harness --help": [sys.executable, "-m", "harness", "--help"],
        "harness validate (bundle)": [
            sys.executable,
            "-m",
            "harness",
            "validate",
            "tasks",
            "personas",
            "agents",
            "dags",
            "climbs",
        ],
    }
    print(f"{'command':<28} {'median s':>9} {'x python':>9}")
    print(f"{'python -c pass':<28} {baseline:9.3f} {1.0:9.1f}")
    for name, args in cases.items():
        seconds = timed(args, repeats)
        print(f"{name:<28} {seconds:9.3f} {seconds / baseline:9.1f}")


if __name__ == "__main__":
    main()

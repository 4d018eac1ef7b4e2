"""The YAML loader on large and hostile files, against PyYAML's own C loader in the same run.

- a generated task file of 5 MB (an inline start state of many orders): `read_yaml` (data from
  libyaml's events, aliases copied within limits) against `yaml.load(..., CSafeLoader)`, and
  the positions, found again only for a file with a problem;
- the alias bomb of the bad-input corpus: refused by `read_yaml`, against `yaml.safe_load`
  (which returns shared references: cheap to load, and 387 million values to anything that
  walks them).

Prints seconds, peak memory added (tracemalloc) and the ratio to the baseline.

Run: python bench/yaml_read.py [megabytes]
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ORDER = """      O-{n:07d}:
        customer_id: C-100
        items:
          - {{sku: HP-200, name: Wireless headphones, price: 59.0, qty: 1}}
        status: delivered
        placed_at: '2026-11-05'
        tracking: 1Z999AA1012345{n:04d}
        shipping_address: {{street: 12 Analytical Street, city: London, zip: N1, country: GB}}
"""


def big_task(path: Path, size: int) -> None:
    parts = ["kind: task\nid: big\nstart:\n  state:\n    today: '2026-11-20'\n    orders:\n"]
    total, n = len(parts[0]), 0
    while total < size:
        parts.append(ORDER.format(n=n))
        total += len(parts[-1])
        n += 1
    path.write_text("".join(parts))


def measure(work: Callable[[], Any]) -> tuple[float, float]:
    """Seconds of one call, then the peak MB it allocates in a second call (tracing memory
    slows Python down, so not while timing). Errors count as done."""
    began = time.perf_counter()
    with contextlib.suppress(Exception):
        work()
    seconds = time.perf_counter() - began
    tracemalloc.start()
    with contextlib.suppress(Exception):
        work()
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return seconds, peak


def row(name: str, figures: tuple[float, float], base: tuple[float, float]) -> None:
    seconds, peak = figures
    print(f"{name:<44} {seconds:>8.2f} {peak:>8.0f} {seconds / base[0]:>8.2f}")


def main() -> None:
    from harness.specs.located import SpecError, read_yaml

    megabytes = float(sys.argv[1]) if len(sys.argv) > 1 else 5
    print(f"{'':<44} {'seconds':>8} {'peak MB':>8} {'ratio':>8}")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "big.yaml"
        big_task(path, int(megabytes * 1e6))
        text = path.read_text()
        base = measure(lambda: yaml.load(text, Loader=yaml.CSafeLoader))
        row(f"{megabytes:g} MB task: yaml.load, CSafeLoader (baseline)", base, base)
        row("read_yaml", measure(lambda: read_yaml(path)), base)
        row("read_yaml, then every position", measure(lambda: dict(read_yaml(path)[1])), base)
    bomb = ROOT / "tests/bad_inputs/alias-bomb.yaml"
    base = measure(lambda: yaml.safe_load(bomb.read_text()))
    row("alias bomb: yaml.safe_load (baseline)", base, base)
    try:
        read_yaml(bomb)
    except SpecError as exc:
        refusal = str(exc)
    row("read_yaml (refused)", measure(lambda: read_yaml(bomb)), base)
    print(f"  {refusal}")


if __name__ == "__main__":
    main()

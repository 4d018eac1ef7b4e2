"""The accepted variant as a file a person reviews: it `extends` production, holds only the
changed fields, and says in a comment where it came from and what it was measured at."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.climb.candidates import variant_yaml


def write_accepted(
    out_dir: Path,
    production_file: Path,
    name: str,
    changed: dict[str, Any],
    lineage: list[str],
    evidence: list[str],
    climb_id: str,
) -> Path:
    """Write `out_dir/<name>.yaml`; an existing file of that name is never overwritten (a
    numbered name is taken instead)."""
    out_dir = Path(os.path.normpath(out_dir))
    out_dir.mkdir(parents=True, exist_ok=True)
    target, n = out_dir / f"{name}.yaml", 2
    while target.exists():
        target, n = out_dir / f"{name}-{n}.yaml", n + 1
    header = [
        f"# Accepted by `harness climb` ({climb_id}) on {datetime.now(UTC):%Y-%m-%d}.",
        f"# Lineage: {' -> '.join(lineage)}.",
        *(f"# {line}" for line in evidence),
        "",
    ]
    extends = Path(os.path.relpath(production_file, out_dir.resolve()))
    text = variant_yaml(
        target.stem,
        extends,
        changed,
        "Found by hill climbing; changes only what the lineage changed.",
        "\n".join(header) + "\n",
    )
    target.write_text(text, encoding="utf-8")
    return target

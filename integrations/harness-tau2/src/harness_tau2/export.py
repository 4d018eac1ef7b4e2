"""tau2's tasks of a domain written as a harness task folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from harness_tau2.convert import PERSONA, Unsupported, harness_task, persona, tau2_tasks
from harness_tau2.domains import DATA

STATE_FILE = "db.json"


def write_tasks(
    domain: str, out: Path, split: str | None, user_model: str
) -> tuple[int, list[str]]:
    """Write the tasks (`<id>.yaml`), the persona (`personas/tau2-user.yaml`) and the start
    database (`db.json`) into `out`: the number of tasks written, and the tasks skipped with
    why. An unknown domain is a `KeyError` naming the known ones."""
    if domain not in DATA:
        raise KeyError(f"unknown tau2 domain '{domain}'; expected one of: {', '.join(DATA)}")
    tasks = tau2_tasks(domain, split)
    (out / "personas").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(DATA[domain], out / STATE_FILE)
    _dump(persona(user_model), out / "personas" / f"{PERSONA}.yaml")
    written, skipped = 0, []
    for task in tasks:
        try:
            converted = harness_task(domain, task, STATE_FILE)
        except Unsupported as exc:
            skipped.append(str(exc))
            continue
        _dump(converted, out / f"{converted['id']}.yaml")
        written += 1
    return written, skipped


def _dump(data: dict, path: Path) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100))

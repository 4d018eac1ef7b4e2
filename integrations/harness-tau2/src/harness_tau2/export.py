"""tau2's tasks of a domain written as a harness task folder."""

from __future__ import annotations

import shutil
import unicodedata
from pathlib import Path

import yaml

from harness_tau2.convert import PERSONA, Unsupported, harness_task, persona, tau2_tasks
from harness_tau2.domains import DATA

STATE_FILE = "db.json"
MAX_ID_LENGTH = 200
"""Longest task id: it names the task's file (`<id>.yaml`, within a file system's 255 bytes)."""


class BadTasks(ValueError):
    """tau2's tasks that cannot be written as they are (an id two tasks share, an id that is no
    safe file name): found before anything is written."""


def unsafe_id(task_id: str) -> str | None:
    """Why an id cannot name a task file (None: it can): empty, a path separator, `.`/`..`, a
    control character, too long."""
    if not task_id.strip():
        return "is empty"
    if "/" in task_id or "\\" in task_id:
        return "has a path separator"
    if task_id in (".", "..") or task_id.startswith("."):
        return "starts with '.'"
    if any(unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp") for char in task_id):
        return "has a control character"
    if len(task_id.encode("utf-8")) > MAX_ID_LENGTH:
        return f"is longer than {MAX_ID_LENGTH} bytes"
    return None


def write_tasks(
    domain: str, out: Path, split: str | None, user_model: str
) -> tuple[int, list[str]]:
    """Write the tasks (`<id>.yaml`), the persona (`personas/tau2-user.yaml`) and the start
    database (`db.json`) into `out`: the number of tasks written, and the tasks skipped with
    why. An unknown domain is a `KeyError` naming the known ones; an id two tasks share, or
    one that is no safe file name (a path separator, `..`, empty, a control character), is
    `BadTasks`: every task is converted and checked before the first file is written."""
    if domain not in DATA:
        raise KeyError(f"unknown tau2 domain '{domain}'; expected one of: {', '.join(DATA)}")
    converted, skipped = [], []
    for task in tau2_tasks(domain, split):
        try:
            converted.append((task, harness_task(domain, task, STATE_FILE)))
        except Unsupported as exc:
            skipped.append(str(exc))
    check_ids(domain, converted)
    (out / "personas").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(DATA[domain], out / STATE_FILE)
    _dump(persona(user_model), out / "personas" / f"{PERSONA}.yaml")
    for _, data in converted:
        _dump(data, out / f"{data['id']}.yaml")
    return len(converted), skipped


def check_ids(domain: str, converted: list[tuple[object, dict]]) -> None:
    """`BadTasks` naming the first task whose id is unsafe, or that another task has too."""
    seen: dict[str, object] = {}
    for task, data in converted:
        name, source = data["id"], getattr(task, "id", "?")
        why = unsafe_id(name)
        if why is not None:
            raise BadTasks(f"tau2 {domain} task {source!r}: its id {name!r} {why}; nothing written")
        if name in seen:
            raise BadTasks(
                f"tau2 {domain} tasks {getattr(seen[name], 'id', '?')!r} and {source!r} have the "
                f"same id {name!r}; nothing written"
            )
        seen[name] = task


def _dump(data: dict, path: Path) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100))

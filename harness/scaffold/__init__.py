"""`harness init`: a working project for a new domain, copied from `project/` beside this file
(a domain module with two tools and a pydantic state, six tasks, a persona, a baseline python
agent and a variant that `extends` it, a gate config and a DAG)."""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path


class TargetNotEmpty(FileExistsError):
    """`harness init` never writes over an existing project."""


def create_project(target: Path) -> list[Path]:
    """Copy the template into `target` (new or empty); the files written, sorted."""
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise TargetNotEmpty(f"{target} exists and is not an empty folder")
    template = resources.files("harness.scaffold").joinpath("project")
    with resources.as_file(template) as source:
        shutil.copytree(source, target, dirs_exist_ok=True, ignore=_ignored)
    return sorted(p for p in target.rglob("*") if p.is_file())


def _ignored(folder: str, names: list[str]) -> list[str]:
    return [name for name in names if name == "__pycache__"]

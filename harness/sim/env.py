"""Build a task's environment: the domain's class over the task's start state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.domains import Environment, get_domain
from harness.specs.load import deep_merge, read_json
from harness.specs.task import Task


def initial_state(task: Task) -> dict[str, Any]:
    """The start state: the task's state file, with its inline `state` merged over it."""
    base = read_json(Path(task.start.state_file)) if task.start.state_file else {}
    return deep_merge(base, task.start.state)


def make_environment(task: Task, state: dict[str, Any]) -> Environment:
    """A fresh environment of the task's domain holding a copy of `state`."""
    domain = get_domain(task.domain)
    if domain is None:
        raise LookupError(f"unknown domain '{task.domain}'")
    return domain(state)

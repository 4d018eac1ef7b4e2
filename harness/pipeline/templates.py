"""The pipelines that the flag forms of `run-eval` and `compare` stand for, and the `--set`
shortcuts (`agent.`, `task.`, `persona.`) those forms accept: built here, below the commands,
so that code that runs such a pipeline itself (the benches) needs no command-line module."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.specs.agent import ModelRef

# scope -> the (node, parameter) lists that collect `scope.PATH=VALUE` overrides
RUN_EVAL_SHORTCUTS: dict[str, list[tuple[str, str]]] = {
    "agent": [("simulate", "set")],
    "task": [("tasks", "set")],
    "persona": [("tasks", "persona_set")],
}
COMPARE_SHORTCUTS = {**RUN_EVAL_SHORTCUTS, "agent": [("a", "set"), ("b", "set")]}


def _load(
    tasks: list[Path], personas: Path | None, selection: dict[str, Any] | None
) -> dict[str, Any]:
    load: dict[str, Any] = {"paths": [str(p) for p in tasks], **(selection or {})}
    if personas is not None:
        load["personas"] = str(personas)
    return {"uses": "load_tasks", "with": load}


def _simulate(agent: Path, trials: int, concurrency: int) -> dict[str, Any]:
    return {
        "uses": "simulate",
        "needs": ["tasks"],
        "with": {"agent": str(agent), "trials": trials, "concurrency": concurrency},
    }


def _judge(judge_model: ModelRef | None) -> dict[str, Any] | None:
    """A judge as a pipeline's data holds it (and its stored configuration records it)."""
    return None if judge_model is None else judge_model.model_dump(mode="json", exclude_none=True)


def _grade(need: str, judge_model: ModelRef | None, concurrency: int) -> dict[str, Any]:
    """A grade node; with no judge model, the run's default judge applies (if any)."""
    params: dict[str, Any] = {"concurrency": concurrency}
    if judge_model is not None:
        params["judge_model"] = _judge(judge_model)
    return {"uses": "grade", "needs": [need], "with": params}


def flags_dag(
    tasks: list[Path],
    agent: Path,
    personas: Path | None,
    trials: int,
    concurrency: int,
    judge_model: ModelRef | None,
    selection: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The pipeline `run-eval --tasks ... --agent ...` stands for (`selection`: load_tasks
    parameters choosing among the tasks)."""
    return {
        "kind": "dag",
        "name": "run-eval",
        "nodes": {
            "tasks": _load(tasks, personas, selection),
            "simulate": _simulate(agent, trials, concurrency),
            "grade": _grade("simulate", judge_model, concurrency),
            "report": {"uses": "report", "needs": ["grade"]},
            "wandb": {"uses": "log_wandb", "needs": ["grade"]},
        },
    }


def compare_dag(
    tasks: list[Path],
    a: Path,
    b: Path,
    personas: Path | None,
    trials: int,
    concurrency: int,
    judge_model: ModelRef | None,
    relative: bool,
    selection: dict[str, Any] | None = None,
    max_error_rate: float | None = None,
) -> dict[str, Any]:
    """The pipeline `compare --a ... --b ...` stands for: both variants on the same tasks (and
    so the same personas and seeds), graded, compared, reported."""
    nodes: dict[str, Any] = {"tasks": _load(tasks, personas, selection)}
    for side, agent in (("a", a), ("b", b)):
        nodes[side] = _simulate(agent, trials, concurrency)
        nodes[f"grade_{side}"] = _grade(side, judge_model, concurrency)
    compare: dict[str, Any] = {}
    if relative and judge_model is not None:
        compare["judge_model"] = _judge(judge_model)
    if max_error_rate is not None:
        compare["max_error_rate"] = max_error_rate
    nodes["compare"] = {"uses": "compare", "needs": ["grade_a", "grade_b"], "with": compare}
    nodes["report"] = {"uses": "report", "needs": ["compare"]}
    return {"kind": "dag", "name": "compare", "nodes": nodes}

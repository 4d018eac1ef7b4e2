"""No implicit judge, for pipelines: a grade node's default judge, and a pipeline whose tasks
need a judge and have none stops before it plays (`harness.grading.requirements`)."""

from __future__ import annotations

from typing import Any

from harness.grading.requirements import (
    JUDGE_HINT,
    judged_tasks,
    missing_judge,
    project_judge,
    tasks_having,
)
from harness.pipeline.dag import Plan
from harness.specs.agent import ModelRef
from harness.specs.located import Location, Problem, SpecError

__all__ = [
    "JUDGE_HINT",
    "judged_tasks",
    "missing_judge",
    "project_judge",
    "require_judges",
    "task_sources",
    "tasks_having",
    "with_default_judge",
]


def with_default_judge(data: dict[str, Any], judge: ModelRef | None) -> dict[str, Any]:
    """The pipeline's data with `judge` given to every grade node that names no judge, so that
    the stored configuration (and a resumed execution) says which judge graded."""
    if judge is None:
        return data
    nodes = data.get("nodes")
    if not isinstance(nodes, dict):
        return data
    value = judge.model_dump(mode="json", exclude_none=True)
    updated = dict(nodes)
    for node_id, node in nodes.items():
        if not isinstance(node, dict) or node.get("uses") != "grade":
            continue
        params = node.get("with") or {}
        if isinstance(params, dict) and params.get("judge_model") is None:
            updated[node_id] = {**node, "with": {**params, "judge_model": value}}
    return {**data, "nodes": updated}


def require_judges(pipeline: Plan, hint: str = JUDGE_HINT) -> None:
    """Raise a SpecError, one line per task set, when a grade node has no judge while tasks it
    grades have `llm_judge` checks that name no model."""
    from harness.pipeline.nodes.load_tasks import planned_tasks

    problems = []
    for node in pipeline.nodes.values():
        if node.kind.name != "grade" or getattr(node.params, "judge_model", None) is not None:
            continue
        for source in task_sources(pipeline, node.id):
            message = missing_judge(planned_tasks(source).cases)
            if message is not None:
                where = Location(", ".join(source.params.paths))
                problems.append(Problem(where, "", f"{message}: {hint}"))
    if problems:
        raise SpecError(list(dict.fromkeys(problems)))


def task_sources(pipeline: Plan, node_id: str) -> list[Any]:
    """The load_tasks nodes upstream of a node."""
    found, seen, todo = [], set(), [node_id]
    while todo:
        node = pipeline.nodes[todo.pop()]
        if node.id in seen:
            continue
        seen.add(node.id)
        if node.kind.name == "load_tasks":
            found.append(node)
        todo += [need for need in node.needs if need in pipeline.nodes]
    return found

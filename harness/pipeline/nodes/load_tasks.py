"""`load_tasks`: task files and folders, filtered by id, tag and level, sampled or limited,
cross-checked (`harness.sim.taskset`)."""

from __future__ import annotations

from typing import Any

from harness.pipeline.nodes import NodeContext, NodeKind, register
from harness.pipeline.types import Tasks
from harness.sim.taskset import LoadTasksParams, TaskSet, load_task_set

__all__ = ["LoadTasksParams", "load_task_set", "planned_tasks", "tasks_output"]


def tasks_output(task_set: TaskSet) -> Tasks:
    """The node's output for a task set."""
    return Tasks(
        task_ids=task_set.task_ids,
        content_hash=task_set.content_hash,
        task_hashes=task_set.task_hashes,
        source=task_set.source,
    ).with_cases(task_set.cases)


def planned_tasks(node: Any) -> TaskSet:
    """The task set a load_tasks node (planned, or running: its context) resolved when the
    pipeline was planned; loaded now only when it was not."""
    if node.resolved is not None:
        return node.resolved
    return load_task_set(node.params, f"node {node.id}")


async def run(params: LoadTasksParams, inputs: list[Any], ctx: NodeContext) -> Tasks:
    found = (
        ctx.resolved if ctx.resolved is not None else load_task_set(params, f"node {ctx.node_id}")
    )
    return tasks_output(found)


def check(params: LoadTasksParams) -> TaskSet:
    return load_task_set(params)


register(
    NodeKind(
        "load_tasks",
        LoadTasksParams,
        (),
        Tasks,
        run,
        always_run=True,
        files=("paths", "personas"),
        check=check,
    )
)

"""No implicit judge. An `llm_judge` check is decided by the model it names, else by the judge
the run is given (`--judge-model`, a grade node's or a climb's `judge_model`, else the project
file's `judge_model`). A run whose tasks need a judge and have none stops before it plays an
episode: a default small model would only spend the run's time turning verdicts into errors."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from harness.grading.checks.llm_judge import LLMJudgeCheck
from harness.pipeline.dag import Plan
from harness.project import find_project
from harness.sim.suite import TaskCase
from harness.specs.agent import ModelRef
from harness.specs.located import Location, Problem, SpecError, display, format_path

JUDGE_HINT = "pass --judge-model, set judge_model in harness.yaml, or give the check a model"
SHOWN_IDS = 3  # task ids a missing-judge line names before it says "..."


def project_judge() -> ModelRef | None:
    """The project file's `judge_model`, if it names one."""
    project = find_project()
    if project.judge_model is None or project.source is None:
        return None
    try:
        return ModelRef.model_validate(project.judge_model)
    except ValidationError as exc:
        error = exc.errors()[0]
        path = format_path(("judge_model", *error["loc"]))
        raise SpecError.at(Location(display(project.source)), path, error["msg"]) from None


def judged_tasks(cases: list[TaskCase]) -> list[str]:
    """Ids of the tasks with an `llm_judge` check that names no model of its own."""
    return [
        case.task.id
        for case in cases
        if any(isinstance(c, LLMJudgeCheck) and c.model is None for c in case.task.checks)
    ]


def missing_judge(cases: list[TaskCase]) -> str | None:
    """What a run of these tasks without a judge lacks, said in words; None if nothing."""
    ids = judged_tasks(cases)
    return f"{tasks_having(ids, 'llm_judge checks')} and no judge model is set" if ids else None


def tasks_having(ids: list[str], what: str) -> str:
    """'3 tasks have WHAT (a, b, c)', naming at most `SHOWN_IDS` of them."""
    shown = ", ".join(ids[:SHOWN_IDS]) + (", ..." if len(ids) > SHOWN_IDS else "")
    count = "1 task has" if len(ids) == 1 else f"{len(ids)} tasks have"
    return f"{count} {what} ({shown})"


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
    from harness.pipeline.nodes.load_tasks import load_task_set

    problems = []
    for node in pipeline.nodes.values():
        if node.kind.name != "grade" or getattr(node.params, "judge_model", None) is not None:
            continue
        for source in task_sources(pipeline, node.id):
            message = missing_judge(load_task_set(source.params, f"node {source.id}").cases)
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

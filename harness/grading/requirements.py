"""What grading a task set needs before anything is played: a judge for its `llm_judge` checks
that name no model, and OS isolation (or the user's permission) for its python checks.

No implicit judge: an `llm_judge` check is decided by the model it names, else by the judge the
run is given (`--judge-model`, a grade node's or a climb's `judge_model`, else the project
file's `judge_model`); a default small model would only spend the run's time turning verdicts
into errors. No sandbox, no checker code: without bubblewrap or Docker, python checks run only
where the user allowed checker code to run without isolation (`--unsafe-checkers`, a grade
node's `sandbox: none`, `HARNESS_SANDBOX=none`)."""

from __future__ import annotations

from pydantic import ValidationError

from harness.grading.checks.llm_judge import LLMJudgeCheck
from harness.grading.checks.python import PythonCheck
from harness.grading.sandbox import isolation_problem
from harness.project import find_project
from harness.sim.suite import TaskCase
from harness.specs.agent import ModelRef
from harness.specs.located import Location, SpecError, display, format_path

JUDGE_HINT = "pass --judge-model, set judge_model in harness.yaml, or give the check a model"
SHOWN_IDS = 3  # task ids a line names before it says "..."


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


def checked_tasks(cases: list[TaskCase]) -> list[str]:
    """Ids of the tasks with a python check (checker code)."""
    return [
        case.task.id
        for case in cases
        if any(isinstance(check, PythonCheck) for check in case.task.checks)
    ]


def missing_isolation(cases: list[TaskCase], unsafe: bool = False) -> str | None:
    """Why grading these tasks here would run checker code with no permission to, in one line;
    None when it would not (no python checks, OS isolation, or `unsafe`)."""
    ids = list(dict.fromkeys(checked_tasks(cases)))
    problem = isolation_problem(unsafe) if ids else None
    if problem is None:
        return None
    return f"{tasks_having(ids, 'python checks')}, which need OS isolation, and {problem}"

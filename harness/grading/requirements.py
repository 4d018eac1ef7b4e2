"""What grading a task set needs before anything is played: a judge for its checks whose kind
uses one (`uses_judge`, e.g. `llm_judge`) and that name no model, and OS isolation (or the user's
permission) for its checks whose kind runs code (`runs_code`, e.g. `python`). Each kind's class
says what it needs, so a plug-in kind is held to the same rules as the built-in ones.

No implicit judge: a judged check is decided by the model it names, else by the judge the run is
given (`--judge-model`, a grade node's or a climb's `judge_model`, else the project file's
`judge_model`); a default small model would only spend the run's time turning verdicts into
errors. No sandbox, no checker code: without bubblewrap or Docker, checks that run code run only
where the user allowed checker code to run without isolation (`--unsafe-checkers`, a grade
node's `sandbox: none`, `HARNESS_SANDBOX=none`)."""

from __future__ import annotations

from collections.abc import Callable

from harness.grading.checks import needs_run_judge, runs_code
from harness.grading.sandbox import isolation_problem
from harness.options import ModelOption, model_ref
from harness.project import find_project
from harness.sim.suite import TaskCase
from harness.specs.agent import ModelRef
from harness.specs.checks import CheckBase, kind_name
from harness.specs.located import Location, SpecError, display

JUDGE_HINT = "pass --judge-model, set judge_model in harness.yaml, or give the check a model"
SHOWN_IDS = 3  # task ids a line names before it says "..."


def resolve_judge(
    given: ModelOption | None,
    where: Location,
    name: str = "judge_model",
    fallback: ModelOption | None = None,
    project: bool = True,
) -> ModelRef | None:
    """The judge of the checks that name no model, as a model role is resolved, in this one
    place: the one given (`--judge-model`, an entry point's `judge_model`), else `fallback` (the
    judge a stored run was graded with), else with `project` the project file's `judge_model`;
    None if none. Always a `ModelRef`, checked (`model_ref`: a scripted judge's rules file must
    exist); a bad one is `BadOptions` naming `where` and `name`."""
    if given is not None:
        return model_ref(given, where, name)
    if fallback is not None:
        return model_ref(fallback, where, name)
    return project_judge() if project else None


def project_judge() -> ModelRef | None:
    """The project file's `judge_model`, if it names one (checked as any judge is)."""
    project = find_project()
    if project.judge_model is None or project.source is None:
        return None
    return model_ref(project.judge_model, Location(display(project.source)), "judge_model")


def judged_tasks(cases: list[TaskCase]) -> list[str]:
    """Ids of the tasks with a check that the run's judge decides (its kind uses a judge and it
    names no model of its own)."""
    return [case.task.id for case in cases if any(map(needs_run_judge, case.task.checks))]


def missing_judge(cases: list[TaskCase]) -> str | None:
    """What a run of these tasks without a judge lacks, said in words; None if nothing."""
    ids = judged_tasks(cases)
    if not ids:
        return None
    kinds = kinds_of(cases, needs_run_judge)
    return f"{tasks_having(ids, f'{kinds} checks')} and no judge model is set"


def kinds_of(cases: list[TaskCase], which: Callable[[CheckBase], bool]) -> str:
    """The kinds of the tasks' checks that `which` picks, in words: 'llm_judge', 'a or b'."""
    checks = (check for case in cases for check in case.task.checks if which(check))
    return " or ".join(dict.fromkeys(kind_name(type(check)) for check in checks))


def tasks_having(ids: list[str], what: str) -> str:
    """'3 tasks have WHAT (a, b, c)', naming at most `SHOWN_IDS` of them."""
    shown = ", ".join(ids[:SHOWN_IDS]) + (", ..." if len(ids) > SHOWN_IDS else "")
    count = "1 task has" if len(ids) == 1 else f"{len(ids)} tasks have"
    return f"{count} {what} ({shown})"


def checked_tasks(cases: list[TaskCase]) -> list[str]:
    """Ids of the tasks with a check whose kind runs code the task ships (checker code)."""
    return [case.task.id for case in cases if any(map(runs_code, case.task.checks))]


def missing_isolation(cases: list[TaskCase], unsafe: bool = False) -> str | None:
    """Why grading these tasks here would run checker code with no permission to, in one line;
    None when it would not (no checks that run code, OS isolation, or `unsafe`)."""
    ids = list(dict.fromkeys(checked_tasks(cases)))
    problem = isolation_problem(unsafe) if ids else None
    if problem is None:
        return None
    kinds = kinds_of(cases, runs_code)
    return f"{tasks_having(ids, f'{kinds} checks')}, which need OS isolation, and {problem}"


def check_gradable(
    cases: list[TaskCase], judge: ModelRef | None, unsafe_checkers: bool, where: Location
) -> None:
    """Stop before anything is played or written when these tasks cannot be graded here:
    checks that need the run's judge with no judge, checks that run code with no OS isolation
    and no permission. One `SpecError` naming `where`, one line for both."""
    problems = []
    if judge is None and (message := missing_judge(cases)) is not None:
        problems.append(f"{message}: {JUDGE_HINT}")
    if (message := missing_isolation(cases, unsafe_checkers)) is not None:
        problems.append(message)
    if problems:
        raise SpecError.at(where, "", "; ".join(problems))

"""`harness tasks list`: what a folder of tasks holds, after the same selection as run-eval."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli._common import (
    IdsOpt,
    LevelOpt,
    LimitOpt,
    SampleOpt,
    SeedOpt,
    TagsOpt,
    make_console,
    task_selection,
    user_errors,
)

tasks_app = typer.Typer(help="Task files and folders.", no_args_is_help=True)


@tasks_app.command("list")
def tasks_list(
    paths: Annotated[list[Path], typer.Argument(help="Task files or folders.")],
    ids: IdsOpt = None,
    tags: TagsOpt = None,
    level: LevelOpt = None,
    sample: SampleOpt = None,
    seed: SeedOpt = 0,
    limit: LimitOpt = None,
) -> None:
    """Every task (validated, with its persona and domain): id, level, tags, domain, persona,
    number of checks."""
    from rich.table import Table

    from harness.project import use_project_of
    from harness.sim.taskset import LoadTasksParams, load_task_set
    from harness.specs.references import check_paths

    selection = task_selection(ids, tags, level, sample, seed, limit)
    params = LoadTasksParams.model_validate({"paths": [str(p) for p in paths], **selection})
    with user_errors():
        check_paths(paths)
        use_project_of(paths[0] if paths else None)
        cases = load_task_set(params, "tasks list").cases
    table = Table(title=f"{len(cases)} tasks", title_justify="left")
    for column in ("id", "level", "tags", "domain", "persona", "checks"):
        table.add_column(column, overflow="fold")
    for case in cases:
        task = case.task
        table.add_row(
            task.id,
            str(task.level),
            ", ".join(task.tags),
            case.domain.domain or case.domain.__name__,
            ", ".join(p.name for p in case.personas),
            str(len(task.checks)),
        )
    make_console().print(table)

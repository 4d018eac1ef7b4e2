"""Run an eval pipeline as `harness run-eval` and `harness compare` do: a DAG file with its
`--set` overrides, the pipeline a command's flags stand for (`run-eval --tasks --agent`,
`compare --a --b --tasks`), or a stored execution resumed. Each plans, checks and executes
through `harness.pipeline.runner.run_pipeline`, so nothing is written before the pipeline has
passed its checks, and a command is a parse, one of these calls and a print."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.defaults import STATE_DIR
from harness.options import BadOptions
from harness.pipeline.check import check_file
from harness.pipeline.nodes.log_wandb import WandbRuns, finish_pending
from harness.pipeline.runner import (
    Outcome,
    RunOptions,
    read_dag,
    run_pipeline,
    stored_pipeline,
    with_overrides,
)
from harness.pipeline.summary import outcome_summary
from harness.pipeline.templates import COMPARE_SHORTCUTS, RUN_EVAL_SHORTCUTS, compare_dag, flags_dag
from harness.specs.located import Location

__all__ = [
    "Outcome",
    "RunOptions",
    "WandbRuns",
    "check_file",
    "finish_wandb_runs",
    "outcome_summary",
    "resume_pipeline",
    "run_compare",
    "run_dag",
    "run_eval",
]


def run_dag(dag: Path, options: RunOptions, overrides: Sequence[str] = ()) -> Outcome:
    """Run a DAG file with `--set NODE.PARAM=VALUE` overrides."""
    data, positions = read_dag(dag)
    data = with_overrides(data, positions, list(overrides))
    return run_pipeline(data, positions, dag, options)


def resume_pipeline(pipeline_id: str, options: RunOptions) -> Outcome:
    """Resume a stored execution: the nodes that finished are reused, the rest run."""
    data, positions, source = stored_pipeline(options.store, pipeline_id)
    return run_pipeline(data, positions, source, options, pipeline_id)


def run_eval(
    tasks: list[Path],
    agent: Path,
    options: RunOptions,
    *,
    personas: Path | None = None,
    trials: int = 1,
    concurrency: int = 8,
    selection: dict[str, Any] | None = None,
    overrides: Sequence[str] = (),
) -> Outcome:
    """The pipeline `run-eval --tasks ... --agent ...` stands for: load, simulate, grade (with
    `options.judge_model`, else the project's judge), report; overrides may use the `agent.`,
    `task.` and `persona.` shortcuts."""
    data = flags_dag(tasks, agent, personas, trials, concurrency, options.judge_model, selection)
    positions: dict[Any, Any] = {}  # where `--set` overrides wrote, for located errors
    data = with_overrides(data, positions, list(overrides), RUN_EVAL_SHORTCUTS)
    return run_pipeline(data, positions, Path("run-eval"), options)


def run_compare(
    tasks: list[Path],
    a: Path,
    b: Path,
    options: RunOptions,
    *,
    personas: Path | None = None,
    trials: int = 1,
    concurrency: int = 8,
    relative: bool = True,
    selection: dict[str, Any] | None = None,
    max_error_rate: float | None = None,
    markdown: Path | None = None,
    overrides: Sequence[str] = (),
) -> Outcome:
    """The pipeline `compare --a ... --b ... --tasks ...` stands for: both variants on the
    same tasks, graded, compared (with `relative` and a judge, the relative judge too),
    reported (and the Markdown summary written to `markdown`)."""
    judge = options.judge_model
    data = compare_dag(
        tasks, a, b, personas, trials, concurrency, judge, relative, selection, max_error_rate
    )
    if markdown:
        data["nodes"]["report"]["with"] = {"markdown": str(markdown)}
    positions: dict[Any, Any] = {}
    data = with_overrides(data, positions, list(overrides), COMPARE_SHORTCUTS)
    return run_pipeline(data, positions, Path("compare"), options)


def finish_wandb_runs(folder: str | Path = STATE_DIR, timeout_s: float = 120) -> WandbRuns:
    """Finish the W&B runs still pending in `folder` (a `log_wandb` node's `dir`): a pipeline's
    run is written by a detached process after the command returns, so call this before
    `wandb sync` of the folder or before reading the run. A run whose writer died is written
    here, once; a run being written is waited for, up to `timeout_s`; a run that cannot be
    written (its data unreadable, W&B refusing it) is said in `failed`, and the others are
    written all the same. `BadOptions` when `folder` is not a folder."""
    path = Path(folder)
    if not path.is_dir():
        found = "a file" if path.exists() else "nothing"
        expected = f"expected the folder a log_wandb node writes to (its `dir`), found {found}"
        raise BadOptions.at(Location(str(path)), "", expected)
    return finish_pending(path, timeout_s)

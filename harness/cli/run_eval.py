"""`harness run-eval`: run a pipeline from a DAG file, from flags, or resume one."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness import defaults
from harness.cli._common import (
    CacheOpt,
    ConcurrencyOpt,
    IdsOpt,
    JsonOpt,
    LevelOpt,
    LimitOpt,
    NoCacheOpt,
    PricesOpt,
    RetriesOpt,
    SampleOpt,
    SeedOpt,
    StoreOpt,
    TagsOpt,
    TimeoutOpt,
    TrialsOpt,
    UnsafeCheckersOpt,
    announce,
    json_stdout,
    parse_model_option,
    task_selection,
    user_errors,
)
from harness.cli._executor import ExecutorOpt, WorkersOpt, executor_name
from harness.cli.outcome import print_outcome


def run_eval(
    dag: Annotated[
        Path | None, typer.Argument(help="A DAG file (instead of --tasks/--agent).")
    ] = None,
    tasks: Annotated[
        list[Path] | None, typer.Option("--tasks", help="Task files or folders.")
    ] = None,
    agent: Annotated[Path | None, typer.Option("--agent", help="Agent variant file.")] = None,
    personas: Annotated[
        Path | None, typer.Option(help="Personas folder (default: nearest personas/ folder).")
    ] = None,
    trials: TrialsOpt = 1,
    ids: IdsOpt = None,
    tags: TagsOpt = None,
    level: LevelOpt = None,
    sample: SampleOpt = None,
    seed: SeedOpt = 0,
    limit: LimitOpt = None,
    concurrency: ConcurrencyOpt = defaults.CONCURRENCY,
    judge_model: Annotated[
        str | None,
        typer.Option(
            help="Model of llm_judge checks that name none, for every grade node that names "
            "none: an id, or a mapping like '{id: openai/gpt-4.1-mini, base_url: ...}' "
            "(default: the project file's judge_model; tasks that need a judge and have none "
            "stop the run before it plays)."
        ),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="Override a node parameter NODE.PARAM=VALUE; with --tasks/"
            "--agent also agent.PATH=, task.PATH=, persona.PATH=VALUE.",
        ),
    ] = None,
    resume: Annotated[
        str | None, typer.Option(help="Finish an interrupted pipeline execution (its id).")
    ] = None,
    fresh: Annotated[bool, typer.Option("--fresh", help="Reuse no cached node.")] = False,
    store: StoreOpt = defaults.RESULTS_STORE,  # type: ignore[assignment]  # typer parses it
    cache: CacheOpt = defaults.RESPONSE_CACHE,
    no_cache: NoCacheOpt = False,
    prices: PricesOpt = None,
    timeout: TimeoutOpt = defaults.MODEL_TIMEOUT_S,
    retries: RetriesOpt = defaults.MODEL_RETRIES,
    weave_project: Annotated[
        str | None, typer.Option(help="Trace to this W&B project (entity/project), online.")
    ] = None,
    traces: Annotated[Path, typer.Option(help="Local trace store, when not tracing online.")] = (
        defaults.TRACE_STORE
    ),
    no_traces: Annotated[bool, typer.Option("--no-traces", help="Record no traces.")] = False,
    executor: ExecutorOpt = None,
    workers: WorkersOpt = None,
    unsafe_checkers: UnsafeCheckersOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Run an eval pipeline: a DAG file, or the default one from --tasks and --agent.

    The default pipeline is load tasks -> simulate -> grade -> report (and a W&B run). Unchanged
    nodes are reused; exit 1 if a gate fails. --json prints one JSON summary instead: the
    pipeline, each run's pass rate with its interval, errors by side and cost, the comparisons
    and gate decisions."""
    from harness.api.pipeline import RunOptions, resume_pipeline, run_dag, run_eval
    from harness.options import EvalOptions, RuntimeOptions, SelectionOptions, checked
    from harness.project import use_project_of
    from harness.specs.located import Location, SpecError
    from harness.specs.references import check_paths

    options = RunOptions(
        store=store,
        cache=None if no_cache else cache,
        prices=prices,
        timeout_s=timeout,
        retries=retries,
        weave_project=weave_project,
        traces=None if no_traces else traces,
        fresh=fresh,
        on_start=announce,
        executor=executor_name(executor),
        workers=workers,
        unsafe_checkers=unsafe_checkers,
        keep_store=True,  # the summary reads the store the pipeline opened
    )
    forms = {"a DAG file": dag, "--tasks/--agent": tasks or agent, "--resume": resume}
    with user_errors(), json_stdout(as_json):
        # The rules `harness.evaluate` checks its options with, before anything is written.
        checked(
            EvalOptions, "run-eval", cli=True, trials=trials, concurrency=concurrency,
            executor=options.executor, workers=workers, unsafe_checkers=unsafe_checkers,
        )  # fmt: skip
        checked(RuntimeOptions, "run-eval", cli=True, timeout_s=timeout, retries=retries)
        checked(SelectionOptions, "run-eval", cli=True, sample=sample, seed=seed, limit=limit)
        check_paths([*(tasks or []), *([agent] if agent else []), *([dag] if dag else [])])
        use_project_of(dag or (tasks[0] if tasks else None) or agent)
        if len([form for form, given in forms.items() if given]) != 1:
            raise SpecError.at(
                Location("run-eval"),
                "",
                "give exactly one of a DAG file, --tasks with --agent, or --resume",
            )
        options.judge_model = parse_model_option("--judge-model", judge_model)
        if resume:
            outcome = resume_pipeline(resume, options)
        elif dag is not None:
            outcome = run_dag(dag, options, set_ or [])
        else:
            if not tasks or agent is None:
                raise SpecError.at(Location("run-eval"), "", "--tasks and --agent go together")
            outcome = run_eval(
                tasks, agent, options, personas=personas, trials=trials,
                concurrency=concurrency, overrides=set_ or [],
                selection=task_selection(ids, tags, level, sample, seed, limit),
            )  # fmt: skip
    raise typer.Exit(print_outcome(outcome, store, as_json))

"""`harness run-eval`: run a pipeline from a DAG file, from flags, or resume one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
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
from harness.store_location import StoreTarget


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

    started: list[str] = []  # the pipeline's id, once it started (what Ctrl-C names)
    options = RunOptions(
        store=store,
        cache=None if no_cache else cache,
        prices=prices,
        timeout_s=timeout,
        retries=retries,
        weave_project=weave_project,
        traces=None if no_traces else traces,
        fresh=fresh,
        on_start=lambda pipeline_id, name: _started(started, pipeline_id, name),
        executor=executor_name(executor),
        workers=workers,
        unsafe_checkers=unsafe_checkers,
        keep_store=True,  # the summary reads the store the pipeline opened
    )
    forms = {"a DAG file": dag, "--tasks/--agent": tasks or agent, "--resume": resume}
    with user_errors(), json_stdout(as_json), stopped_by_ctrl_c(store, started):
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


def _started(started: list[str], pipeline_id: str, name: str) -> None:
    """Keep the id of the pipeline that started (for the line of a Ctrl-C) and announce it."""
    started.append(pipeline_id)
    announce(pipeline_id, name)


EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a process Ctrl-C stopped


@contextmanager
def stopped_by_ctrl_c(store: StoreTarget, started: list[str]) -> Iterator[None]:
    """Ctrl-C: what finished is stored; one line says so and how to finish the rest, exit 130
    (a second Ctrl-C while the run winds down exits at once, the same way)."""
    try:
        yield
    except KeyboardInterrupt:
        raise typer.Exit(interrupted(store, started[0] if started else None)) from None


def interrupted(store: StoreTarget, pipeline_id: str | None) -> int:
    """The one line of a run Ctrl-C stopped: how many episodes it stored (each is stored as it
    finishes) and the command that plays only the missing ones; returns the exit code."""
    from harness.api.stored import open_store, stored_runs

    if pipeline_id is None:
        typer.echo("harness: interrupted before the pipeline started; nothing stored", err=True)
        return EXIT_INTERRUPTED
    try:
        opened = open_store(store)
        try:
            runs = stored_runs(opened, pipeline_id)
            count = sum(len(opened.episode_keys(run.id)) for run in runs)
        finally:
            opened.close()
        stored = f"{count} finished episode{'s' if count != 1 else ''} stored"
    except Exception:  # pylint: disable=broad-exception-caught  # the line matters more
        stored = "finished episodes stored"
    where = "" if str(store) == str(defaults.RESULTS_STORE) else f" --store {store}"
    typer.echo(
        f"harness: interrupted: {stored}; resume with: "
        f"harness run-eval --resume {pipeline_id}{where}",
        err=True,
    )
    return EXIT_INTERRUPTED

"""`harness compare`: variant B against variant A, played now or from two stored runs."""

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
    SampleOpt,
    SeedOpt,
    StoreOpt,
    TagsOpt,
    TrialsOpt,
    UnsafeCheckersOpt,
    announce,
    json_stdout,
    make_console,
    option_check,
    parse_model_option,
    print_json,
    task_selection,
    user_errors,
)
from harness.cli.outcome import print_outcome


def compare(
    runs: Annotated[
        list[str] | None, typer.Argument(help="Two stored runs RUN_A RUN_B (instead of --a/--b).")
    ] = None,
    a: Annotated[Path | None, typer.Option("--a", help="Variant A (the baseline side).")] = None,
    b: Annotated[Path | None, typer.Option("--b", help="Variant B (the candidate side).")] = None,
    tasks: Annotated[
        list[Path] | None, typer.Option("--tasks", help="Task files or folders.")
    ] = None,
    personas: Annotated[Path | None, typer.Option(help="Personas folder.")] = None,
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
            help="Judge of llm_judge checks and of the relative comparison (default: the "
            "project file's judge_model; with none, no relative judging)."
        ),
    ] = None,
    no_relative: Annotated[
        bool, typer.Option("--no-relative", help="Skip the pairwise relative judge.")
    ] = False,
    max_error_rate: Annotated[
        float,
        typer.Option(
            callback=option_check("CompareOptions", "max_error_rate", "--max-error-rate"),
            help="Most share of either run's episodes without evidence (errors, ungraded), 0 to 1: "
            "above it the verdict is 'undecided: errors', as the gate's ceiling.",
        ),
    ] = defaults.MAX_ERROR_RATE,
    allow_suite_change: Annotated[
        bool,
        typer.Option(
            "--allow-suite-change",
            help="Compare two stored runs of different suites (task ids and contents) on the "
            "tasks both played, said first; otherwise refused, as the gate refuses them.",
        ),
    ] = False,
    markdown: Annotated[Path | None, typer.Option(help="Also write a Markdown summary.")] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="NODE.PARAM=VALUE, or agent./task./persona.FIELD=VALUE "
            "(agent applies to both variants).",
        ),
    ] = None,
    store: StoreOpt = defaults.RESULTS_STORE,  # type: ignore[assignment]  # typer parses it
    cache: CacheOpt = defaults.RESPONSE_CACHE,
    no_cache: NoCacheOpt = False,
    no_traces: Annotated[bool, typer.Option("--no-traces", help="Record no traces.")] = False,
    unsafe_checkers: UnsafeCheckersOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Is variant B better than A? Paired statistics on the same tasks, personas and seeds.

    A one-line verdict (better, worse, or no detectable difference with the minimum detectable
    effect; undecided when errors could change it or either run is over --max-error-rate),
    pass rates with intervals clustered by task, their difference with the task as the unit (its
    interval, the sign-flip test over tasks; McNemar over trials shown for reference only),
    pass^k at k = 1, 2, 4, 8, n, the relative judge's win rate, breakdowns per level and tag,
    cost/latency/turn deltas and the tasks that flipped. Either plays both variants, or compares
    two stored runs. --json prints one JSON summary instead (the runs and the comparison)."""
    from harness.api.pipeline import RunOptions, run_compare
    from harness.api.stored import compare_stored, stored_summary
    from harness.grading.requirements import resolve_judge
    from harness.project import use_project_of
    from harness.report.terminal import print_comparison
    from harness.specs.located import Location, SpecError

    options = RunOptions(
        store=store,
        cache=None if no_cache else cache,
        traces=None if no_traces else defaults.TRACE_STORE,
        on_start=announce,
        unsafe_checkers=unsafe_checkers,
        keep_store=True,  # the summary reads the store the pipeline opened
    )
    with user_errors():
        use_project_of((tasks[0] if tasks else None) or a or b)  # before the project's judge
        given = parse_model_option("--judge-model", judge_model)
        judge = resolve_judge(given, Location("--judge-model"))
    # No judge is no relative judging (a comparison needs none), said once, after the result.
    unjudged = judge is None and not no_relative
    if runs:
        with user_errors():
            if len(runs) != 2 or a or b or tasks:
                raise SpecError.at(
                    Location("compare"), "", "give two stored runs, or --a, --b and --tasks"
                )
            relative = None if no_relative else judge
            with json_stdout(as_json):
                done = compare_stored(
                    options, runs[0], runs[1], relative, markdown, max_error_rate,
                    allow_suite_change,
                )  # fmt: skip
            if as_json:
                print_json(stored_summary(store, runs, [done.result], files=done.files))
                _say_unjudged(unjudged)
                return
        print_comparison(done.result, make_console())
        for file in done.files:
            typer.echo(f"wrote {file}")
        _say_unjudged(unjudged)
        return
    options.judge_model = judge
    with user_errors(), json_stdout(as_json):
        if not (a and b and tasks):
            raise SpecError.at(Location("compare"), "", "--a, --b and --tasks go together")
        outcome = run_compare(
            tasks, a, b, options, personas=personas, trials=trials, concurrency=concurrency,
            relative=not no_relative, max_error_rate=max_error_rate, markdown=markdown,
            selection=task_selection(ids, tags, level, sample, seed, limit),
            overrides=set_ or [],
        )  # fmt: skip
    code = print_outcome(outcome, store, as_json)
    _say_unjudged(unjudged)
    raise typer.Exit(code)


def _say_unjudged(unjudged: bool) -> None:
    """The one line that says the relative judge did not run for want of a judge model."""
    if unjudged:
        typer.echo(
            "compare: no judge model, so the relative judge was not run (pass --judge-model or "
            "set judge_model in harness.yaml)",
            err=True,
        )

"""`harness grade RUN_ID`: re-score a stored run with the tasks' current checks, into a new
run id, so that what a gate decided on under the old one never changes."""

from __future__ import annotations

from typing import Annotated

import typer

from harness import defaults
from harness.cli._common import (
    CacheOpt,
    ConcurrencyOpt,
    NoCacheOpt,
    PricesOpt,
    RetriesOpt,
    StoreOpt,
    TimeoutOpt,
    UnsafeCheckersOpt,
    make_console,
    parse_model_option,
    user_errors,
    warn_unsandboxed,
)


def grade(
    run_id: Annotated[
        str, typer.Argument(help="The stored run to re-score (it is left as it is).")
    ],
    store: StoreOpt = defaults.RESULTS_STORE,  # type: ignore[assignment]  # typer parses it
    judge_model: Annotated[
        str | None,
        typer.Option(
            help="Judge model (default: the one the run was graded with, else the project "
            "file's judge_model)."
        ),
    ] = None,
    concurrency: ConcurrencyOpt = defaults.CONCURRENCY,
    cache: CacheOpt = defaults.RESPONSE_CACHE,
    no_cache: NoCacheOpt = False,
    prices: PricesOpt = None,
    timeout: TimeoutOpt = defaults.MODEL_TIMEOUT_S,
    retries: RetriesOpt = defaults.MODEL_RETRIES,
    unsafe_checkers: UnsafeCheckersOpt = False,
) -> None:
    """Re-score a stored run with the tasks' current checks, without simulating again.

    The new verdicts go to a new run (a copy of the run's episodes, recording `regraded_from`),
    whose id is printed: gate, compare or report it like any run. The old run is unchanged."""
    from harness.api.pipeline import RunOptions
    from harness.api.stored import regrade
    from harness.report.terminal import print_run
    from harness.store import Store

    options = RunOptions(
        store=store,
        cache=None if no_cache else cache,
        prices=prices,
        timeout_s=timeout,
        retries=retries,
        unsafe_checkers=unsafe_checkers,
    )
    with user_errors():
        judge = parse_model_option("--judge-model", judge_model)
        regraded = regrade(options, run_id, judge, concurrency)
    console = make_console()
    print_run(regraded.figures, console)
    results = Store(store)
    try:
        warn_unsandboxed(results, regraded.run_id, console)
    finally:
        results.close()
    graded_by = f"judge {regraded.judge.id}" if regraded.judge is not None else "no judge"
    console.print(
        f"regraded {run_id} as {regraded.run_id} ({graded_by}); {run_id} keeps its verdicts",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )

"""`harness grade RUN_ID`: re-score a stored run with the tasks' current checks."""

from __future__ import annotations

from typing import Annotated

import typer

from harness import defaults
from harness.cli._common import (
    CacheOpt,
    NoCacheOpt,
    PricesOpt,
    RetriesOpt,
    StoreOpt,
    TimeoutOpt,
    make_console,
    parse_model_option,
    user_errors,
    warn_unsandboxed,
)


def grade(
    run_id: Annotated[str, typer.Argument(help="The stored run to re-score.")],
    store: StoreOpt = defaults.RESULTS_STORE,
    judge_model: Annotated[
        str | None, typer.Option(help="Judge model (default: the one the run was graded with).")
    ] = None,
    concurrency: Annotated[
        int, typer.Option(min=1, help="Episodes graded at once.")
    ] = defaults.CONCURRENCY,
    cache: CacheOpt = defaults.RESPONSE_CACHE,
    no_cache: NoCacheOpt = False,
    prices: PricesOpt = None,
    timeout: TimeoutOpt = defaults.MODEL_TIMEOUT_S,
    retries: RetriesOpt = defaults.MODEL_RETRIES,
) -> None:
    """Re-score a stored run with the tasks' current checks, without simulating again.

    The new verdicts are stored beside the old ones."""
    from harness.pipeline.runner import RunOptions
    from harness.pipeline.stored import regrade
    from harness.report.terminal import print_run
    from harness.store import Store

    options = RunOptions(
        store=store,
        cache=None if no_cache else cache,
        prices=prices,
        timeout_s=timeout,
        retries=retries,
    )
    with user_errors():
        judge = parse_model_option("--judge-model", judge_model) if judge_model else None
        figures = regrade(options, run_id, judge, concurrency)
    console = make_console()
    print_run(figures, console)
    results = Store(store)
    try:
        warn_unsandboxed(results, run_id, console)
    finally:
        results.close()

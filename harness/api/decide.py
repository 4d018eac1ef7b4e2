"""Decisions on stored runs: an A/B comparison, as `harness compare` makes it (the CI gate is
`harness.api.gate`)."""

from __future__ import annotations

from collections.abc import Sequence

from harness import defaults
from harness.api.evaluate import open_runtime, run_sync
from harness.api.results import RunResult
from harness.compare import ComparisonResult, compare_runs
from harness.options import CompareOptions, checked
from harness.specs.agent import ModelRef
from harness.store import Store
from harness.store.tasks import PlayedTask, played_tasks
from harness.store_location import StoreTarget


def _run_id(run: RunResult | str) -> str:
    return run.run_id if isinstance(run, RunResult) else run


def _store(store: StoreTarget | None, *runs: RunResult | str) -> StoreTarget:
    """The store named, else the store of the first `RunResult` given, else the default."""
    if store is not None:
        return store
    for run in runs:
        if isinstance(run, RunResult):
            return run.store
    return defaults.RESULTS_STORE


def played(store: Store, run_id: str) -> Sequence[PlayedTask]:
    """The tasks a stored run played, as the store recorded them."""
    info = store.run(run_id)
    if info is None:
        raise LookupError(f"no run {run_id!r} in {store.path}")
    return played_tasks(store, info)


def compare(
    run_a: RunResult | str,
    run_b: RunResult | str,
    *,
    store: StoreTarget | None = None,
    judge_model: ModelRef | None = None,
    max_error_rate: float = defaults.MAX_ERROR_RATE,
) -> ComparisonResult:
    """A/B: B against A on the tasks both played (paired, clustered by task); with a judge
    model, the relative judge too (each pair both ways). `max_error_rate` is 0 to 1
    (`CompareOptions`)."""
    checked(CompareOptions, "compare", max_error_rate=max_error_rate)
    target, a, b = _store(store, run_a, run_b), _run_id(run_a), _run_id(run_b)

    async def compared() -> ComparisonResult:  # on the thread that runs it: SQLite's rule
        opened, runtime = Store(target), open_runtime() if judge_model is not None else None
        try:
            judge = runtime.model(judge_model, role="judge") if runtime is not None else None
            cases = played(opened, a)
            return await compare_runs(opened, a, b, cases, judge, max_error_rate)
        finally:
            if runtime is not None:
                await runtime.aclose()
                runtime.close()
            opened.close()

    return run_sync(compared())

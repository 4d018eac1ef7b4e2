"""Decisions on stored runs: an A/B comparison, as `harness compare` makes it (the CI gate is
`harness.api.gate`)."""

from __future__ import annotations

from collections.abc import Sequence

from harness import defaults
from harness.api.evaluate import JudgeModel, open_runtime, run_sync
from harness.api.results import RunResult
from harness.compare import ComparisonResult, compare_runs
from harness.gate.suites import compare_suites, describe_change, run_suite
from harness.grading.requirements import resolve_judge
from harness.models import ModelRuntime
from harness.options import CompareOptions, checked, refused
from harness.specs.located import Location, SpecError
from harness.store import Store
from harness.store.tasks import PlayedTask, played_tasks
from harness.store_location import StoreTarget


def run_id_of(run: object, where: str, name: str) -> str:
    """The id of a run given as a `RunResult` or a run id; anything else is `BadOptions`
    (and a `TypeError`) naming `where`'s argument `name`."""
    if isinstance(run, RunResult):
        return run.run_id
    if isinstance(run, str) and run:
        return run
    raise refused(where, name, "a RunResult or a run id (a string)", run)


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
    judge_model: JudgeModel | None = None,
    max_error_rate: float = defaults.MAX_ERROR_RATE,
    runtime: ModelRuntime | None = None,
    allow_suite_change: bool = False,
) -> ComparisonResult:
    """A/B: B against A on the tasks both played (paired, clustered by task); with a judge
    model (a `ModelRef`, a mapping or a model id; a scripted judge's rules file must exist),
    the relative judge too (each pair both ways). Runs are `RunResult`s or run ids;
    `max_error_rate` is 0 to 1 (`CompareOptions`); `runtime` a model runtime to share
    (`open_runtime`; default: one of its own when a judge is given). A bad argument is
    `BadOptions` naming it. Runs of different suites (task ids or contents) are refused as the
    gate refuses them (`SpecError` naming the differing tasks), unless `allow_suite_change`:
    then they are compared on the tasks they share, and the result's notes say so."""
    checked(
        CompareOptions, "compare", max_error_rate=max_error_rate,
        allow_suite_change=allow_suite_change,
    )  # fmt: skip
    a, b = run_id_of(run_a, "compare", "run_a"), run_id_of(run_b, "compare", "run_b")
    judge = resolve_judge(judge_model, Location("compare"), project=False)
    target = _store(store, run_a, run_b)

    async def compared() -> ComparisonResult:  # on the thread that runs it: SQLite's rule
        opened = Store(target)
        own = open_runtime() if judge is not None and runtime is None else None
        models = runtime or own
        try:
            model = models.model(judge, role="judge") if models and judge else None
            cases = played(opened, a)
            only, notes = shared_tasks(opened, a, b, allow_suite_change)
            result = await compare_runs(opened, a, b, cases, model, max_error_rate, only)
            result.notes = notes
            return result
        finally:
            if models is not None:
                await models.aclose()  # the clients opened in this event loop
            if own is not None:
                own.close()
            opened.close()

    return run_sync(compared())


def shared_tasks(
    store: Store, run_a: str, run_b: str, allow_change: bool
) -> tuple[set[str] | None, list[str]]:
    """None when both runs played the same suite; else, when allowed, the tasks they share in
    the same content and the note that says the comparison covers only those: otherwise a
    `SpecError` naming the tasks that differ (as the gate refuses a changed suite)."""
    infos = [store.run(run_id) for run_id in (run_a, run_b)]
    for run_id, info in zip((run_a, run_b), infos, strict=True):
        if info is None:
            raise LookupError(f"no run {run_id!r} in {store.path}")
    assert infos[0] is not None and infos[1] is not None  # checked above
    suite = compare_suites(run_suite(store, infos[0]), run_suite(store, infos[1]))
    if suite.same:
        return None, []
    change = describe_change(suite, "A", "B")
    if not allow_change:
        raise SpecError.at(
            Location("compare"),
            "",
            f"runs {run_a} (A) and {run_b} (B) ran different suites ({change}); pass "
            f"--allow-suite-change to compare them on the {len(suite.common)} tasks they share",
        )
    shared = ", ".join(suite.common) or "none"
    note = (
        f"compared on the {len(suite.common)} tasks both suites share ({shared}); {change}"
    )
    return set(suite.common), [note]

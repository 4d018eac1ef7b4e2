"""Work on runs already in the results store, without simulating: re-grade, compare, gate,
summarise, export, as the commands do (`harness grade`, `compare RUN RUN`, `gate`, `runs show`,
`export`). Compare and gate are `harness.api.compare` and `harness.api.gate` with their report
files written; regrading calls the `grade` node's function, so a command and a node never
disagree. All but regrading read the tasks a run played from the store (`played_tasks`):
a stored run needs no task file unless it is graded again with its tasks' current checks."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from harness.api.decide import compare
from harness.api.gate import gate
from harness.compare import ComparisonResult
from harness.defaults import MAX_ERROR_RATE
from harness.engine.context import Engine
from harness.engine.grade import grade_run
from harness.engine.progress import Board
from harness.gate import GateResult, load_gate_config
from harness.gate.suites import choose_runs
from harness.grading.requirements import check_gradable, resolve_judge
from harness.pipeline.runner import RunOptions, model_runtime
from harness.pipeline.types import Run, levels_of
from harness.report.contents import ReportContents, ReportedRun
from harness.report.export import ExportFormat, export_rows, write_export
from harness.report.files import write_reports
from harness.report.json_summary import ResultsSummary, results_summary
from harness.report.summary import RunFigures, run_figures
from harness.sim.taskset import LoadTasksParams, TaskSet, load_task_set
from harness.specs.agent import ModelRef
from harness.specs.located import Location, SpecError
from harness.store import RunInfo, Store, new_id
from harness.store.tasks import played_tasks, task_records
from harness.store_location import StoreLocation, StoreTarget

if TYPE_CHECKING:
    from harness.models import ModelRuntime

T = TypeVar("T")


@dataclass
class StoredComparison:
    """Two stored runs compared, and the report files written."""

    result: ComparisonResult
    files: list[Path]


@dataclass
class StoredGate:
    """The gate's decision on a stored run, and the report files written."""

    result: GateResult
    files: list[Path]


NO_STORE = "no results store (run an eval first)"


def open_store(path: StoreTarget, missing: str = NO_STORE) -> Store:
    """The results store at `path`; when there is none, an error saying `missing`."""
    location = StoreLocation.of(path)
    if not location.exists():
        raise SpecError.at(Location(str(location)), "", missing)
    return Store(location)


def stored_run(store: Store, run_id: str) -> RunInfo:
    """A stored run's header; an error naming the run when the store has none such."""
    info = store.run(run_id)
    if info is None:
        raise SpecError.at(Location(str(store.path)), "", f"no run {run_id!r} in the store")
    return info


def stored_runs(store: Store, run_or_pipeline: str) -> list[RunInfo]:
    """The runs an id stands for: a pipeline's runs (oldest first), or the one run it names; an
    error naming the id when the store has neither."""
    pipeline = store.pipeline(run_or_pipeline)
    if pipeline is not None:
        return store.runs(pipeline.id)
    info = store.run(run_or_pipeline)
    if info is None:
        raise SpecError.at(
            Location(str(store.path)), "", f"no pipeline or run {run_or_pipeline!r} in the store"
        )
    return [info]


def stored_figures(store_path: StoreTarget, run_or_pipeline: str) -> list[RunFigures]:
    """The summary of a stored run, or of each run of a stored pipeline, as `run-eval` printed
    it. Task levels come from the store (`played_tasks`); for a run stored before the store
    kept them, from its task files, and when those no longer load, the levels are left out
    rather than the summary."""
    store = open_store(store_path)
    try:
        figures = []
        for info in stored_runs(store, run_or_pipeline):
            try:
                levels = levels_of(played_tasks(store, info))
            except (SpecError, LookupError):
                levels = {}
            figures.append(run_figures(store, info.id, levels))
        return figures
    finally:
        store.close()


def stored_summary(
    store_path: StoreTarget,
    run_ids: list[str],
    comparisons: list[ComparisonResult] | None = None,
    gates: list[GateResult] | None = None,
    files: list[Path] | None = None,
) -> ResultsSummary:
    """The `--json` summary of stored runs and of the decisions a command took on them."""
    store = open_store(store_path)
    try:
        written = [str(file) for file in files or []]
        return results_summary(store, run_ids, comparisons, gates, written)
    finally:
        store.close()


def export_stored(
    store_path: StoreTarget, run_or_pipeline: str, form: ExportFormat, out: Path | None
) -> int:
    """Write each episode of a stored run (or of every run of a pipeline) as JSON lines or CSV
    to `out`, or to stdout; the number of episodes written. The runs are found before the file
    is opened, so an unknown id leaves no file behind."""
    store = open_store(store_path)
    try:
        runs = stored_runs(store, run_or_pipeline)
        if out is None:
            return write_export(export_rows(store, runs), form, sys.stdout)
        try:
            file = out.open("w", encoding="utf-8", newline="")
        except OSError as exc:
            raise SpecError.at(Location(str(out)), "", f"cannot write: {exc.strerror}") from None
        with file:
            return write_export(export_rows(store, runs), form, file)
    finally:
        store.close()


def stored_tasks(info: RunInfo) -> TaskSet:
    """The task set a stored run played, loaded again from its recorded parameters (so with
    the tasks' current checks)."""
    return load_task_set(LoadTasksParams.model_validate(info.config["tasks"]))


def _with_runtime(options: RunOptions, work: Callable[[ModelRuntime], Awaitable[T]]) -> T:
    """Run `work` with a model runtime made from the options, and close the runtime after."""
    runtime = model_runtime(options)

    async def main() -> T:
        try:
            return await work(runtime)
        finally:
            await runtime.aclose()

    try:
        return asyncio.run(main())
    finally:
        runtime.close()


@dataclass
class Regraded:
    """A stored run graded again: the new run that holds the new verdicts, and its summary."""

    run_id: str
    judge: ModelRef | None  # None: no task needed one
    figures: RunFigures


def regrade(options: RunOptions, run_id: str, judge: ModelRef | None, concurrency: int) -> Regraded:
    """Re-score a stored run with its tasks' current checks, as the `grade` node does, into a
    new run: a copy of its episodes whose configuration records `regraded_from`, the judge and
    the tasks' current content, graded in a pass of its own. The first run's verdicts, which a
    gate may have decided on, stay as they were. The judge defaults to the one the run was
    graded with, else the project file's; tasks that need a judge and have none, or python checks
    and no OS isolation here (without `options.unsafe_checkers`), stop it before anything is
    written."""
    store = open_store(options.store, f"no run {run_id!r} in the store")
    try:
        info = stored_run(store, run_id)
        task_set = stored_tasks(info)
        played = {task for task, _ in store.episode_keys(run_id)}
        where = Location(", ".join(task_set.source.get("paths", [])))
        fallback = info.config.get("judge_model")  # the judge the run was graded with
        judge_ref = resolve_judge(judge, Location("--judge-model"), "", fallback)
        cases = [c for c in task_set.cases if c.task.id in played]
        unsafe = options.unsafe_checkers
        check_gradable(cases, judge_ref, unsafe, where)
        grading = new_id("grade-")
        values = {
            "regraded_from": run_id,
            "judge_model": judge_ref.model_dump(mode="json") if judge_ref else None,
            "grading": grading,
            # the content of the tasks it is graded with, which the gate compares with others
            "suite": {t: h for t, h in task_set.task_hashes.items() if t in played},
        }
        current = task_records(task_set.cases, task_set.task_hashes)
        copy = store.copy_run(run_id, values, tasks=current)  # the tasks it is graded with
        run = Run(
            run_id=copy,
            variant=info.variant,
            variant_hash=info.variant_hash,
            episodes=len(store.episode_keys(copy)),
        ).with_cases(task_set.cases)

        async def grade(runtime: ModelRuntime) -> None:
            with Board(enabled=options.progress) as board:
                engine = Engine(store, runtime, board=board, unsafe_checkers=unsafe)
                await grade_run(
                    engine, copy, task_set.cases, judge_ref, grading, concurrency=concurrency
                )

        _with_runtime(options, grade)
        store.finish_run(copy)
        return Regraded(copy, judge_ref, run_figures(store, copy, run.levels))
    finally:
        store.close()


def compare_stored(
    options: RunOptions,
    run_a: str,
    run_b: str,
    judge: ModelRef | None,
    markdown: Path | None,
    max_error_rate: float = MAX_ERROR_RATE,
    allow_suite_change: bool = False,
) -> StoredComparison:
    """Two stored runs compared (`harness.api.compare`, with the options' model runtime for the
    relative judge; runs of different suites refused unless `allow_suite_change`), and the
    Markdown summary written when asked."""
    store = open_store(options.store, "no results store")
    try:
        stored_run(store, run_a)
    finally:
        store.close()
    runtime = model_runtime(options) if judge is not None else None
    try:
        result = compare(
            run_a, run_b, store=options.store, judge_model=judge,
            max_error_rate=max_error_rate, runtime=runtime,
            allow_suite_change=allow_suite_change,
        )  # fmt: skip
    finally:
        if runtime is not None:
            runtime.close()
    store = open_store(options.store)
    try:
        files = write_reports(store, ReportContents(comparisons=[result]), markdown, None)
    finally:
        store.close()
    return StoredComparison(result, files)


def gate_stored(
    store_path: StoreTarget,
    config_path: Path,
    candidate: str | None,
    baseline: str | None,
    junit: Path | None,
    markdown: Path | None,
    allow_suite_change: bool = False,
    play: bool = True,
    candidate_agent: Path | None = None,
    baseline_agent: Path | None = None,
) -> StoredGate:
    """The gate on stored runs, as the `gate` node decides it (`harness.api.gate`): the
    candidate (default: the newest run of the baseline's suite and lineage by another variant
    than the baseline's, never the baseline's own variant run again) against the baseline
    (default: the stored baseline of the candidate's suite; `choose_runs`), after playing the
    evidence it needs. The decision joins the gate history; the report files go where asked,
    else where the config says."""
    config = load_gate_config(config_path)
    store = open_store(store_path)
    try:
        chosen = choose_runs(store, candidate, baseline, allow_suite_change)
    finally:
        store.close()
    result = gate(
        chosen.candidate,
        chosen.baseline,
        config=config,
        store=store_path,
        allow_suite_change=allow_suite_change,
        play=play,
        candidate_agent=candidate_agent,
        baseline_agent=baseline_agent,
        progress=None,
    )
    result.notes = [*chosen.notes, *result.notes]
    store = open_store(store_path)
    try:
        cases = played_tasks(store, stored_run(store, chosen.candidate))
        contents = ReportContents(
            runs=[ReportedRun(chosen.candidate, levels_of(cases))], gates=[result]
        )
        markdown = markdown or (Path(config.markdown) if config.markdown else None)
        junit = junit or (Path(config.junit) if config.junit else None)
        files = write_reports(store, contents, markdown, junit)
    finally:
        store.close()
    return StoredGate(result, files)

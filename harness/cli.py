"""The `harness` command line. Only this module knows about the command line; heavy modules are
imported inside the commands so that `harness --help` stays fast."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(
    help="Evaluate LLM agents on YAML tasks with simulated users, graders and a CI gate.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

DEFAULT_TRACES = Path(".harness/traces.db")
DEFAULT_STORE = Path(".harness/results.db")
DEFAULT_CACHE = Path(".harness/cache.db")
DEFAULT_JUDGE = "local/smollm2"
traces_app = typer.Typer(
    help="Episodes recorded as Weave traces (local store).", no_args_is_help=True
)
runs_app = typer.Typer(
    help="Pipeline executions and runs in the results store.", no_args_is_help=True
)
app.add_typer(traces_app, name="traces")
app.add_typer(runs_app, name="runs")

StoreOpt = Annotated[Path, typer.Option(help="SQLite results file.")]
CacheOpt = Annotated[Path, typer.Option(help="Response cache file.")]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the cache.")]
PricesOpt = Annotated[
    Path | None, typer.Option(help="YAML of USD per million tokens, over the bundled prices.")
]
TimeoutOpt = Annotated[float, typer.Option(min=0.01, help="Seconds per model call.")]
RetriesOpt = Annotated[int, typer.Option(min=0, help="Retries of a failed model call.")]


@contextmanager
def user_errors() -> Iterator[None]:
    """Print located input errors one per line on stderr and exit with 2, without a traceback."""
    from harness.specs.load import SpecError

    try:
        yield
    except SpecError as exc:
        for problem in exc.problems:
            typer.echo(str(problem), err=True)
        raise typer.Exit(2) from None


def parse_model_option(option: str, text: str) -> dict[str, Any]:
    """A model given on the command line, as an id or a YAML mapping, checked."""
    import yaml
    from pydantic import ValidationError

    from harness.specs.agent import ModelRef
    from harness.specs.load import Location, SpecError, format_path

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        data = text
    try:
        return ModelRef.model_validate(data).model_dump(mode="json", exclude_none=True)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = Location(f"{option} {text}")
        raise SpecError.at(where, format_path(error["loc"]), error["msg"]) from None


@app.command("run-eval")
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
    trials: Annotated[int, typer.Option(min=1, help="Episodes per task.")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, help="Episodes run at once.")] = 8,
    judge_model: Annotated[
        str,
        typer.Option(
            help="Model of llm_judge checks: an id, or a mapping like "
            "'{id: openai/gpt-4.1-mini, base_url: ...}'."
        ),
    ] = DEFAULT_JUDGE,
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
    store: StoreOpt = DEFAULT_STORE,
    cache: CacheOpt = DEFAULT_CACHE,
    no_cache: NoCacheOpt = False,
    prices: PricesOpt = None,
    timeout: TimeoutOpt = 60.0,
    retries: RetriesOpt = 4,
    weave_project: Annotated[
        str | None, typer.Option(help="Trace to this W&B project (entity/project), online.")
    ] = None,
    traces: Annotated[Path, typer.Option(help="Local trace store, when not tracing online.")] = (
        DEFAULT_TRACES
    ),
    no_traces: Annotated[bool, typer.Option("--no-traces", help="Record no traces.")] = False,
) -> None:
    """Run an eval pipeline: a DAG file, or the default one from --tasks and --agent.

    The default pipeline is load tasks -> simulate -> grade -> report (and a W&B run). Unchanged
    nodes are reused; exit 1 if a gate fails."""
    from harness.pipeline.dag import flags_dag
    from harness.pipeline.runner import (
        RUN_EVAL_SHORTCUTS,
        RunOptions,
        read_dag,
        run_pipeline,
        with_overrides,
    )
    from harness.specs.load import Location, SpecError
    from harness.store import Store

    options = RunOptions(
        store=store,
        cache=None if no_cache else cache,
        prices=prices,
        timeout_s=timeout,
        retries=retries,
        weave_project=weave_project,
        traces=None if no_traces else traces,
        fresh=fresh,
    )
    with user_errors():
        chosen = [
            name
            for name, given in (
                ("a DAG file", dag),
                ("--tasks/--agent", tasks or agent),
                ("--resume", resume),
            )
            if given
        ]
        if len(chosen) != 1:
            raise SpecError.at(
                Location("run-eval"),
                "",
                "give exactly one of a DAG file, --tasks with --agent, or --resume",
            )
        if resume:
            info = Store(store).pipeline(resume) if store.is_file() else None
            if info is None:
                raise SpecError.at(Location(str(store)), "", f"no pipeline {resume!r} to resume")
            data, positions, source = info.config["dag"], {}, Path(info.config["source"])
        elif dag is not None:
            data, positions = read_dag(dag)
            data, source = with_overrides(data, positions, set_ or []), dag
        else:
            if not tasks or agent is None:
                raise SpecError.at(Location("run-eval"), "", "--tasks and --agent go together")
            judge = parse_model_option("--judge-model", judge_model)
            data = flags_dag(tasks, agent, personas, trials, concurrency, judge)
            positions, source = {}, Path("run-eval")
            data = with_overrides(data, positions, set_ or [], RUN_EVAL_SHORTCUTS)
            preflight(data)
        outcome = run_pipeline(data, positions, source, options, resume or "")
    raise typer.Exit(print_outcome(outcome, store))


def preflight(data: dict[str, Any]) -> None:
    """Check the flag form's agent against its tasks before anything is written."""
    from harness.pipeline.nodes.load_tasks import LoadTasksParams, load_task_set
    from harness.pipeline.nodes.simulate import SimulateParams, load_variant
    from harness.sim.suite import check_variant

    task_set = load_task_set(LoadTasksParams.model_validate(data["nodes"]["tasks"]["with"]))
    variant = load_variant(SimulateParams.model_validate(data["nodes"]["simulate"]["with"]))
    check_variant(variant, task_set.cases)


def print_outcome(outcome: Any, store_path: Path) -> int:
    """Print every report and the pipeline's summary; the exit code (1 when a gate failed or a
    node failed)."""
    from rich.console import Console

    from harness.pipeline.types import Report
    from harness.report.summary import run_figures
    from harness.report.terminal import print_comparison, print_gate, print_run
    from harness.store import Store

    console = Console()
    execution = outcome.execution
    exit_code = 1 if execution.failed else 0
    store = Store(store_path)
    try:
        for output in execution.outputs.values():
            if not isinstance(output, Report):
                continue
            for graded in output.runs:
                levels = {case.task.id: case.task.level for case in graded.cases}
                print_run(run_figures(store, graded.run_id, levels), console)
            for comparison in output.comparisons:
                print_comparison(comparison.result, console)
            for gate in output.gates:
                print_gate(gate.passed, gate.reasons, console)
                exit_code = exit_code or (0 if gate.passed else 1)
            for file in output.files:
                console.print(f"wrote {file}")
    finally:
        store.close()
    states = ", ".join(f"{node} {status.state}" for node, status in execution.statuses.items())
    console.print(f"pipeline {outcome.pipeline_id} ({outcome.plan.name}): {states}")
    for node, status in execution.statuses.items():
        if status.error:
            console.print(f"[red]node {node} failed: {status.error}[/red]")
    console.print(f"stored in {store_path}")
    return exit_code


@app.command()
def grade(
    run_id: Annotated[str, typer.Argument(help="The stored run to re-score.")],
    store: StoreOpt = DEFAULT_STORE,
    judge_model: Annotated[
        str | None, typer.Option(help="Judge model (default: the one the run was graded with).")
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Episodes graded at once.")] = 8,
    cache: CacheOpt = DEFAULT_CACHE,
    no_cache: NoCacheOpt = False,
    prices: PricesOpt = None,
    timeout: TimeoutOpt = 60.0,
    retries: RetriesOpt = 4,
) -> None:
    """Re-score a stored run with the tasks' current checks, without simulating again.

    The new verdicts are stored beside the old ones."""
    import asyncio

    from rich.console import Console

    from harness.models import CallPolicy, ModelRuntime, PriceTable, ResponseCache
    from harness.pipeline.nodes import NodeContext
    from harness.pipeline.nodes.grade import grade_run
    from harness.pipeline.nodes.load_tasks import LoadTasksParams, load_task_set
    from harness.pipeline.progress import Board
    from harness.pipeline.types import Run
    from harness.report.summary import run_figures
    from harness.report.terminal import print_run
    from harness.specs.agent import ModelRef
    from harness.specs.load import Location, SpecError
    from harness.store import Store
    from harness.tracing import NO_TRACER

    results = Store(store) if store.is_file() else None
    info = results.run(run_id) if results else None
    with user_errors():
        if info is None or results is None:
            raise SpecError.at(Location(str(store)), "", f"no run {run_id!r} in the store")
        task_set = load_task_set(LoadTasksParams.model_validate(info.config["tasks"]))
        judge = ModelRef.model_validate(
            parse_model_option("--judge-model", judge_model)
            if judge_model
            else info.config.get("judge_model") or DEFAULT_JUDGE
        )
        runtime = ModelRuntime(
            cache=None if no_cache else ResponseCache(cache),
            prices=PriceTable(prices),
            policy=CallPolicy(timeout_s=timeout, max_retries=retries),
        )
    run = Run(
        run_id=run_id,
        variant=info.variant,
        variant_hash=info.variant_hash,
        episodes=len(results.episode_keys(run_id)),
    ).with_cases(task_set.cases)

    async def regrade() -> None:
        with Board() as board:
            ctx = NodeContext(results, runtime, NO_TRACER, board, "", "grade")
            try:
                await grade_run(run, judge, concurrency, ctx)
            finally:
                await runtime.aclose()

    try:
        asyncio.run(regrade())
        levels = {case.task.id: case.task.level for case in task_set.cases}
        print_run(run_figures(results, run_id, levels), Console())
    finally:
        results.close()
        runtime.close()


@runs_app.command("list")
def runs_list(
    store: StoreOpt = DEFAULT_STORE,
    limit: Annotated[int, typer.Option(min=1, help="How many, newest first.")] = 20,
) -> None:
    """List pipeline executions with their runs."""
    from collections import Counter

    from rich.console import Console
    from rich.table import Table

    from harness.store import Store

    if not store.is_file():
        typer.echo(f"{store}: no results store (run an eval first)", err=True)
        raise typer.Exit(2)
    results = Store(store)
    table = Table(title=f"Pipelines in {store}", title_justify="left")
    for column in ("pipeline", "name", "created", "status", "nodes", "runs"):
        table.add_column(column)
    for info in results.pipelines(limit):
        counts = Counter(v["state"] for v in info.nodes.values())
        states = ", ".join(f"{state} {n}" for state, n in sorted(counts.items()))
        runs = ", ".join(f"{r.id} {r.variant}" for r in results.runs(info.id))
        table.add_row(info.id, info.name, info.created_at, info.status, states, runs)
    results.close()
    Console().print(table)


@runs_app.command("show")
def runs_show(
    run_id: Annotated[str, typer.Argument(help="A pipeline id (dag-...) or a run id.")],
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Show a pipeline's fully resolved configuration and nodes, or a run's configuration."""
    import yaml

    from harness.store import Store

    results = Store(store) if store.is_file() else None
    pipeline = results.pipeline(run_id) if results else None
    run = results.run(run_id) if results and pipeline is None else None
    if pipeline is None and run is None:
        typer.echo(f"{store}: no pipeline or run {run_id!r}", err=True)
        raise typer.Exit(2)
    if pipeline is not None:
        shown = {
            "pipeline": pipeline.id,
            "name": pipeline.name,
            "status": pipeline.status,
            "created": pipeline.created_at,
            "nodes": pipeline.nodes,
            "runs": [r.id for r in results.runs(pipeline.id)],
            "config": pipeline.config,
        }
    else:
        shown = {
            "run": run.id,
            "variant": run.variant,
            "variant_hash": run.variant_hash,
            "status": run.status,
            "pipeline": run.pipeline_id,
            "config": run.config,
        }
    results.close()
    typer.echo(yaml.safe_dump(shown, sort_keys=False, allow_unicode=True))


baseline_app = typer.Typer(help="The run that gates compare candidates with.", no_args_is_help=True)
app.add_typer(baseline_app, name="baseline")


def stored_tasks(store: Any, run_id: str) -> Any:
    """The task set a stored run played, loaded again from its recorded parameters."""
    from harness.pipeline.nodes.load_tasks import LoadTasksParams, load_task_set
    from harness.specs.load import Location, SpecError

    info = store.run(run_id)
    if info is None:
        raise SpecError.at(Location(str(store.path)), "", f"no run {run_id!r} in the store")
    return load_task_set(LoadTasksParams.model_validate(info.config["tasks"]))


def graded_output(store: Any, run_id: str, cases: list[Any]) -> Any:
    """A stored run as the `Graded` output reports take."""
    from collections import Counter

    from harness.pipeline.types import Graded

    info = store.run(run_id)
    counts = Counter(v.outcome for v in store.latest_verdicts(run_id))
    return Graded(
        run_id=run_id,
        variant=info.variant,
        variant_hash=info.variant_hash,
        episodes=len(store.episode_keys(run_id)),
        counts=dict(counts),
    ).with_cases(cases)


@app.command()
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
    trials: Annotated[int, typer.Option(min=1, help="Episodes per task and variant.")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, help="Episodes run at once.")] = 8,
    judge_model: Annotated[
        str, typer.Option(help="Judge of llm_judge checks and of the relative comparison.")
    ] = DEFAULT_JUDGE,
    no_relative: Annotated[
        bool, typer.Option("--no-relative", help="Skip the pairwise relative judge.")
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
    store: StoreOpt = DEFAULT_STORE,
    cache: CacheOpt = DEFAULT_CACHE,
    no_cache: NoCacheOpt = False,
    no_traces: Annotated[bool, typer.Option("--no-traces", help="Record no traces.")] = False,
) -> None:
    """Is variant B better than A? Paired statistics on the same tasks, personas and seeds.

    Pass rates with intervals, their paired difference (bootstrap) and exact McNemar test,
    pass^k, the relative judge's win rate, breakdowns per level and tag, cost/latency/turn
    deltas and the tasks that flipped. Either plays both variants, or compares two stored runs."""
    import asyncio

    from rich.console import Console

    from harness.compare import Side, compare_sides, judge_pairs
    from harness.models import ModelRuntime, ResponseCache
    from harness.pipeline.dag import compare_dag
    from harness.pipeline.runner import (
        COMPARE_SHORTCUTS,
        RunOptions,
        run_pipeline,
        with_overrides,
    )
    from harness.pipeline.types import Comparison, Report
    from harness.report.markdown import render_markdown
    from harness.report.terminal import print_comparison
    from harness.specs.load import Location, SpecError
    from harness.store import Store

    with user_errors():
        judge = parse_model_option("--judge-model", judge_model)
        if runs:
            if len(runs) != 2 or a or b or tasks:
                raise SpecError.at(
                    Location("compare"), "", "give two stored runs, or --a, --b and --tasks"
                )
            if not store.is_file():
                raise SpecError.at(Location(str(store)), "", "no results store")
            results = Store(store)
            task_set = stored_tasks(results, runs[0])
    if not runs:
        with user_errors():
            if not (a and b and tasks):
                raise SpecError.at(Location("compare"), "", "--a, --b and --tasks go together")
            data = compare_dag(tasks, a, b, personas, trials, concurrency, judge, not no_relative)
            if markdown:
                data["nodes"]["report"]["with"] = {"markdown": str(markdown)}
            data = with_overrides(data, {}, set_ or [], COMPARE_SHORTCUTS)
            options = RunOptions(
                store=store,
                cache=None if no_cache else cache,
                traces=None if no_traces else DEFAULT_TRACES,
            )
            outcome = run_pipeline(data, {}, Path("compare"), options)
        raise typer.Exit(print_outcome(outcome, store))
    try:
        side_a, side_b = Side.load(results, runs[0]), Side.load(results, runs[1])
        result = compare_sides(side_a, side_b, task_set.cases)
        if not no_relative:
            runtime = ModelRuntime(cache=None if no_cache else ResponseCache(cache))

            async def relative() -> dict[str, Any]:
                try:
                    model = runtime.model(judge, role="judge")
                    return await judge_pairs(results, side_a, side_b, task_set.cases, model)
                finally:
                    await runtime.aclose()

            result["relative"] = asyncio.run(relative())
            runtime.close()
        print_comparison(result, Console())
        if markdown:
            pair = Comparison(
                a=graded_output(results, runs[0], task_set.cases),
                b=graded_output(results, runs[1], task_set.cases),
                result=result,
            )
            markdown.parent.mkdir(parents=True, exist_ok=True)
            markdown.write_text(render_markdown(results, Report(comparisons=[pair])))
            typer.echo(f"wrote {markdown}")
    finally:
        results.close()


@app.command()
def gate(
    config: Annotated[Path, typer.Option(help="The gate's thresholds.")] = Path("ci/gate.yaml"),
    candidate: Annotated[
        str | None, typer.Option(help="The run to judge (default: the newest run).")
    ] = None,
    baseline: Annotated[
        str | None, typer.Option(help="The run to compare with (default: the stored baseline).")
    ] = None,
    junit: Annotated[Path | None, typer.Option(help="JUnit XML (default: the config's).")] = None,
    markdown: Annotated[
        Path | None, typer.Option(help="Markdown summary (default: the config's).")
    ] = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """The CI regression gate: may the candidate run replace the baseline?

    Exit 0 when it may; 1 naming every rule it breaks (level floors, a significant drop, a
    regression-suite task now failing every trial, cost and latency budgets); 2 on a bad config
    or missing runs. Writes JUnit XML and a Markdown summary."""
    from rich.console import Console

    from harness.gate import gate_run
    from harness.pipeline.nodes.gate import load_gate
    from harness.pipeline.types import GateDecision, Report
    from harness.report.junit import write_junit
    from harness.report.markdown import render_markdown
    from harness.report.terminal import print_gate
    from harness.specs.load import Location, SpecError
    from harness.store import Store

    with user_errors():
        rules = load_gate(config)
        if not store.is_file():
            raise SpecError.at(Location(str(store)), "", "no results store (run an eval first)")
        results = Store(store)
        baseline = baseline or results.baseline()
        if candidate is None:
            candidates = [r.id for r in results.runs() if r.id != baseline]
            if not candidates:
                raise SpecError.at(Location(str(store)), "", "no candidate run in the store")
            candidate = candidates[-1]
        for run_id in filter(None, (candidate, baseline)):
            if results.run(run_id) is None:
                raise SpecError.at(Location(str(store)), "", f"no run {run_id!r} in the store")
        task_set = stored_tasks(results, candidate)
    console = Console()
    try:
        if baseline is None:
            console.print(
                "[yellow]no baseline: only level floors and budgets apply "
                "(harness baseline set RUN_ID)[/yellow]"
            )
        result = gate_run(results, rules, candidate, baseline, task_set.cases)
        graded = graded_output(results, candidate, task_set.cases)
        decision = GateDecision(
            passed=result.passed,
            reasons=result.reasons,
            candidate=graded,
            baseline_run=baseline,
            result={"details": result.details},
        )
        report = Report(runs=[graded], gates=[decision])
        console.print(
            f"candidate {candidate} ({graded.variant}) against baseline {baseline or 'none'}"
        )
        print_gate(result.passed, result.reasons, console)
        for path, write in (
            (junit or rules.junit, write_junit),
            (markdown or rules.markdown, None),
        ):
            if path is None:
                continue
            target = Path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            if write is not None:
                write(results, report, target)
            else:
                target.write_text(render_markdown(results, report))
            console.print(f"wrote {target}")
    finally:
        results.close()
    raise typer.Exit(0 if result.passed else 1)


@baseline_app.command("set")
def baseline_set(
    run_id: Annotated[str, typer.Argument(help="The run that production stands on.")],
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Make a stored run the baseline of `harness gate`."""
    from harness.store import Store

    results = Store(store) if store.is_file() else None
    info = results.run(run_id) if results else None
    if results is None or info is None:
        typer.echo(f"{store}: no run {run_id!r}", err=True)
        raise typer.Exit(2)
    results.set_baseline(run_id)
    results.close()
    typer.echo(f"baseline: {run_id} ({info.variant} {info.variant_hash})")


@baseline_app.command("show")
def baseline_show(store: StoreOpt = DEFAULT_STORE) -> None:
    """Show the baseline run and its pass rate."""
    from harness.report.summary import run_figures
    from harness.store import Store

    results = Store(store) if store.is_file() else None
    run_id = results.baseline() if results else None
    if results is None or run_id is None:
        typer.echo(f"{store}: no baseline set (harness baseline set RUN_ID)", err=True)
        raise typer.Exit(2)
    figures = run_figures(results, run_id)
    results.close()
    typer.echo(
        f"baseline: {run_id} ({figures.variant} {figures.variant_hash}), pass rate "
        f"{figures.rate:.1%} ({figures.passed}/{figures.graded}, 95% Wilson CI "
        f"{figures.low:.1%}-{figures.high:.1%})"
    )


@app.command()
def history(store: StoreOpt = DEFAULT_STORE) -> None:
    """The pass-rate trend of gated runs, per variant and per week."""
    from collections import defaultdict
    from datetime import datetime

    from rich.console import Console
    from rich.table import Table

    from harness.store import Store

    if not store.is_file():
        typer.echo(f"{store}: no results store", err=True)
        raise typer.Exit(2)
    results = Store(store)
    rows = results.gate_history()
    results.close()
    weeks: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        year, week, _ = datetime.fromisoformat(row["at"]).isocalendar()
        weeks[(row["variant"], f"{year}-W{week:02d}")].append(row)
    table = Table(title="Gate history: pass rate per variant and week", title_justify="left")
    for column in (
        "variant",
        "week",
        "gate runs",
        "passed",
        "failed",
        "pass rate",
        "first -> last",
    ):
        table.add_column(column)
    for (variant, week), entries in sorted(weeks.items()):
        rates = [e["pass_rate"] for e in entries]
        passed = sum(e["passed"] for e in entries)
        table.add_row(
            variant,
            week,
            str(len(entries)),
            str(passed),
            str(len(entries) - passed),
            f"{sum(rates) / len(rates):.1%}",
            f"{rates[0]:.1%} -> {rates[-1]:.1%}",
        )
    Console().print(table)


@app.command()
def validate(
    paths: Annotated[list[Path], typer.Argument(help="Spec files or folders to validate.")],
) -> None:
    """Validate task, persona, agent, DAG, gate and script files (kind from `kind:`)."""
    from harness.pipeline.dag import plan
    from harness.sim.suite import load_suite
    from harness.specs.load import SpecError, kind_of, load_spec, read_mapping, spec_files

    problems = []
    with user_errors():
        files = spec_files(paths)
    for path in files:
        try:
            data, positions = read_mapping(path)
            kind = kind_of(path, data, positions)
            if kind == "task":
                load_suite([path])
            elif kind == "dag":
                plan(load_spec(path))  # node kinds, parameters, wiring, referenced files
            else:
                load_spec(path)
        except SpecError as exc:
            problems.extend(exc.problems)
            continue
        typer.echo(f"ok  {kind:<8} {path}")
    for problem in problems:
        typer.echo(str(problem), err=True)
    failed = len({p.location.source for p in problems})
    typer.echo(f"{len(files) - failed} valid, {failed} invalid", err=bool(problems))
    if problems:
        raise typer.Exit(2)


@app.command("fake-server")
def fake_server(
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0 picks a free one).")] = 8000,
    script: Annotated[
        Path | None, typer.Option(help="Rules file of replies (default: echo).")
    ] = None,
    latency: Annotated[float, typer.Option(min=0, help="Seconds before each reply.")] = 0.0,
    fail_429: Annotated[float, typer.Option(min=0, max=1, help="Rate of 429 replies.")] = 0.0,
    fail_500: Annotated[float, typer.Option(min=0, max=1, help="Rate of 500 replies.")] = 0.0,
    hang: Annotated[float, typer.Option(min=0, max=1, help="Rate of hung connections.")] = 0.0,
    malformed: Annotated[float, typer.Option(min=0, max=1, help="Rate of broken JSON.")] = 0.0,
    retry_after: Annotated[float, typer.Option(min=0, help="Retry-After of a 429.")] = 0.05,
    seed: Annotated[int, typer.Option(help="Seed of the fault draws.")] = 0,
) -> None:
    """Serve scripted replies over the OpenAI and Anthropic wire protocols, with faults."""
    import asyncio

    from harness.specs.load import load_script
    from harness.testing.fake_server import FakeServer, Faults

    with user_errors():
        rules = load_script(script).spec if script else None
    faults = Faults(
        rate_429=fail_429,
        rate_500=fail_500,
        rate_hang=hang,
        rate_malformed=malformed,
        retry_after_s=retry_after,
        seed=seed,
    )
    server = FakeServer(rules, latency_s=latency, faults=faults, port=port)

    async def serve() -> None:
        await server.start()
        typer.echo(f"serving OpenAI and Anthropic protocols at {server.url}", err=True)
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


@traces_app.command("list")
def traces_list(
    store: Annotated[Path, typer.Option(help="Local trace store.")] = DEFAULT_TRACES,
    limit: Annotated[int, typer.Option(min=1, help="How many, newest first.")] = 50,
) -> None:
    """List recorded episodes: task, variant, trial, verdict, end reason, turns."""
    from rich.console import Console
    from rich.table import Table

    from harness.traces.episodes import list_episodes

    if not store.is_file():
        typer.echo(f"{store}: no trace store (run an eval first)", err=True)
        raise typer.Exit(2)
    table = Table(title=f"Episodes in {store}", title_justify="left")
    for column in ("id", "task", "variant", "trial", "verdict", "end reason", "turns", "run"):
        table.add_column(column, no_wrap=column in ("id", "verdict"))
    for episode in list_episodes(store, limit):
        t, v, a = episode.transcript, episode.verdict, episode.attributes
        table.add_row(
            episode.call_id[-8:],
            str(a.get("task_id", "")),
            str(a.get("variant", "")),
            str(a.get("trial", "")),
            v.outcome if v else "-",
            t.end_reason.value if t else "running",
            str(t.turns) if t else "-",
            str(a.get("run_id", "")),
        )
    Console().print(table)


@traces_app.command("show")
def traces_show(
    call_id: Annotated[str, typer.Argument(help="Episode call id, or its last characters.")],
    store: Annotated[Path, typer.Option(help="Local trace store.")] = DEFAULT_TRACES,
) -> None:
    """Print one recorded episode as a readable conversation."""
    from rich.console import Console

    from harness.report.conversation import print_conversation
    from harness.traces.episodes import find_episode

    episode = find_episode(store, call_id) if store.is_file() else None
    if episode is None or episode.transcript is None:
        typer.echo(f"{store}: no single finished episode with id {call_id!r}", err=True)
        raise typer.Exit(2)
    print_conversation(episode.transcript, episode.verdict, Console())


SourceOpt = Annotated[
    str, typer.Option(help="local, weave:ENTITY/PROJECT, or a FILE.jsonl export of calls.")
]


def open_source(source: str, store: Path, filters: Any, problems: list[Any]) -> Any:
    """(calls iterator, closer) for a trace source."""
    from harness.specs.load import Location, SpecError
    from harness.traces.calls import read_client, read_jsonl
    from harness.tracing import Tracer, open_local_client, open_tracer

    if source == "local":
        if not store.is_file():
            raise SpecError.at(Location(str(store)), "", "no local trace store")
        tracer = Tracer(open_local_client(store))
        return read_client(tracer.client, filters), tracer.close
    if source.startswith("weave:"):
        try:
            tracer = open_tracer(source.removeprefix("weave:"))
        except RuntimeError as exc:
            raise SpecError.at(Location(f"--source {source}"), "", str(exc)) from None
        return read_client(tracer.client, filters), tracer.close
    path = Path(source)
    if not path.is_file():
        raise SpecError.at(
            Location(f"--source {source}"),
            "",
            "expected local, weave:ENTITY/PROJECT or an existing .jsonl file",
        )
    return read_jsonl(path, filters, problems), lambda: None


@traces_app.command("export")
def traces_export(
    out: Annotated[Path, typer.Option(help="The JSONL file to write.")],
    source: SourceOpt = "local",
    store: Annotated[Path, typer.Option(help="Local trace store.")] = DEFAULT_TRACES,
) -> None:
    """Write calls as JSONL, one Weave call per line in the trace server's call schema."""
    from harness.traces.calls import Filters, write_jsonl

    problems: list[Any] = []
    with user_errors():
        calls, close = open_source(source, store, Filters(), problems)
    try:
        count = write_jsonl(calls, out)
    finally:
        close()
    for problem in problems:
        typer.echo(f"skipped {problem}", err=True)
    typer.echo(f"wrote {count} calls to {out}")


@traces_app.command("to-tasks")
def traces_to_tasks(
    out: Annotated[Path, typer.Option(help="Folder of the task files.")] = Path("tasks/regression"),
    source: SourceOpt = "local",
    store: Annotated[Path, typer.Option(help="Local trace store.")] = DEFAULT_TRACES,
    domain: Annotated[str, typer.Option(help="Domain of the tasks.")] = "support",
    state_file: Annotated[
        Path | None, typer.Option(help="Start-state snapshot (JSON) the tasks start from.")
    ] = None,
    state_db: Annotated[
        Path | None, typer.Option(help="Start-state snapshot (SQLite) the tasks start from.")
    ] = None,
    persona_model: Annotated[
        str | None,
        typer.Option(help="Have personas played by this model instead of replaying the turns."),
    ] = None,
    status: Annotated[str, typer.Option(help="error, success or any.")] = "any",
    negative: Annotated[
        bool, typer.Option("--negative", help="Only conversations with negative feedback.")
    ] = False,
    op: Annotated[
        str | None, typer.Option(help="Only conversations that called this tool.")
    ] = None,
    thread: Annotated[list[str] | None, typer.Option(help="Only these thread ids.")] = None,
    since: Annotated[str | None, typer.Option(help="Calls started at or after (ISO-8601).")] = None,
    until: Annotated[str | None, typer.Option(help="Calls started before (ISO-8601).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing task files.")] = False,
) -> None:
    """Turn production traces into regression tasks (one per cluster of near-duplicates)."""
    from harness.specs.load import Location, SpecError
    from harness.traces.calls import Filters
    from harness.traces.convert import TaskOptions, cluster, write_tasks
    from harness.traces.reconstruct import conversations

    problems: list[Any] = []
    with user_errors():
        if status not in ("error", "success", "any"):
            raise SpecError.at(Location(f"--status {status}"), "", "expected error, success or any")
        filters = Filters(thread_ids=thread or [], since=since, until=until)
        calls, close = open_source(source, store, filters, problems)
    try:
        clusters = cluster(conversations(calls, problems), status, negative, op)
    finally:
        close()
    options = TaskOptions(domain, state_file, state_db, persona_model)
    written = write_tasks(clusters, out, options, force)
    for path in written.made:
        typer.echo(f"made    {path}  ({written.counts[path.name]} trace(s))")
    for path in written.skipped:
        typer.echo(f"skipped {path}  (exists; --force to overwrite)")
    for problem in problems:
        typer.echo(f"unreadable {problem}", err=True)
    typer.echo(
        f"{len(written.made)} made, {len(written.skipped)} skipped, {len(problems)} unreadable"
    )


@app.command()
def schema(
    kind: Annotated[str, typer.Argument(help="task, persona, agent, dag, gate or script.")],
) -> None:
    """Print the JSON Schema of a file kind, for editor autocompletion."""
    from harness.specs.load import json_schema

    with user_errors():
        typer.echo(json.dumps(json_schema(kind), indent=2))


def main() -> None:
    """Entry point of the `harness` command."""
    app(prog_name="harness")


if __name__ == "__main__":
    main()

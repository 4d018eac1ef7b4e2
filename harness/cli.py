"""The `harness` command line. Only this module knows about the command line; heavy modules are
imported inside the commands so that `harness --help` stays fast."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from harness.models import ModelRuntime
    from harness.specs.agent import ModelRef
    from harness.specs.load import Override

app = typer.Typer(
    help="Evaluate LLM agents on YAML tasks with simulated users, graders and a CI gate.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

OVERRIDE_SCOPES = ("agent", "task", "persona")
DEFAULT_TRACES = Path(".harness/traces.db")
traces_app = typer.Typer(
    help="Episodes recorded as Weave traces (local store).", no_args_is_help=True
)
app.add_typer(traces_app, name="traces")


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


def split_overrides(texts: list[str]) -> dict[str, list[Override]]:
    """Route `--set agent.x=1` and `--set task.y=2` to the specs they patch."""
    from harness.specs.load import Location, Override, SpecError

    routed: dict[str, list[Override]] = {scope: [] for scope in OVERRIDE_SCOPES}
    for text in texts:
        scope, override = Override.parse(text).scoped()
        if scope not in routed or not override.keys:
            expected = " or ".join(f"{s}.FIELD=VALUE" for s in OVERRIDE_SCOPES)
            raise SpecError.at(Location(f"--set {text}"), "", f"expected {expected}")
        routed[str(scope)].append(override)
    return routed


StoreOpt = Annotated[Path, typer.Option(help="SQLite results file.")]
CacheOpt = Annotated[Path, typer.Option(help="Response cache file.")]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the cache.")]
PricesOpt = Annotated[
    Path | None, typer.Option(help="YAML of USD per million tokens, over the bundled prices.")
]
TimeoutOpt = Annotated[float, typer.Option(min=0.01, help="Seconds per model call.")]
RetriesOpt = Annotated[int, typer.Option(min=0, help="Retries of a failed model call.")]
JudgeOpt = Annotated[
    str,
    typer.Option(
        help="Model of llm_judge checks: an id, or a mapping like "
        "'{id: openai/gpt-4.1-mini, base_url: ...}'."
    ),
]
DEFAULT_STORE = Path(".harness/results.db")
DEFAULT_CACHE = Path(".harness/cache.db")
DEFAULT_JUDGE = "local/smollm2"


def parse_model_option(option: str, text: str) -> ModelRef:
    """A model given on the command line, as an id or a YAML mapping."""
    import yaml
    from pydantic import ValidationError

    from harness.specs.agent import ModelRef
    from harness.specs.load import Location, SpecError, format_path

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        data = text
    try:
        return ModelRef.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = Location(f"{option} {text}")
        raise SpecError.at(where, format_path(error["loc"]), error["msg"]) from None


def build_runtime(
    cache: Path, no_cache: bool, prices: Path | None, timeout: float, retries: int
) -> ModelRuntime:
    """The model runtime of a command: cache, prices and retry policy."""
    from harness.models import CallPolicy, ModelRuntime, PriceTable, ResponseCache

    return ModelRuntime(
        cache=None if no_cache else ResponseCache(cache),
        prices=PriceTable(prices),
        policy=CallPolicy(timeout_s=timeout, max_retries=retries),
    )


@app.command("run-eval")
def run_eval(
    tasks: Annotated[list[Path], typer.Option("--tasks", help="Task files or folders.")],
    agent: Annotated[Path, typer.Option("--agent", help="Agent variant file.")],
    personas: Annotated[
        Path | None, typer.Option(help="Personas folder (default: nearest personas/ folder).")
    ] = None,
    store: StoreOpt = DEFAULT_STORE,
    trials: Annotated[int, typer.Option(min=1, help="Episodes per task.")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, help="Episodes run at once.")] = 8,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="Override a field: agent.PATH=VALUE, task.PATH=VALUE or persona.PATH=VALUE.",
        ),
    ] = None,
    judge_model: JudgeOpt = DEFAULT_JUDGE,
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
    """Run every task as a simulated episode against an agent variant and print a summary."""
    import asyncio

    from harness.evaluate import evaluate
    from harness.report.terminal import print_summary
    from harness.sim.suite import check_variant, load_suite
    from harness.specs.load import load_agent
    from harness.store import Store
    from harness.tracing import NO_TRACER, open_tracer

    with user_errors():
        routed = split_overrides(set_ or [])
        variant = load_agent(agent, routed["agent"])
        cases = load_suite(tasks, personas, routed["task"], routed["persona"])
        check_variant(variant, cases)
        judge = parse_model_option("--judge-model", judge_model)
        runtime = build_runtime(cache, no_cache, prices, timeout, retries)
    config = {
        "tasks": [str(p) for p in tasks],
        "personas": str(personas) if personas else None,
        "agent": str(agent),
        "overrides": set_ or [],
        "trials": trials,
        "judge_model": judge.model_dump(mode="json"),
        "variant": variant.spec.model_dump(mode="json"),
    }
    tracer = NO_TRACER if no_traces else open_tracer(weave_project, traces)
    results = Store(store)
    try:
        summary = asyncio.run(
            evaluate(
                cases,
                variant.spec,
                results,
                trials=trials,
                concurrency=concurrency,
                config=config,
                runtime=runtime,
                tracer=tracer,
                judge_model=judge,
            )
        )
    finally:
        results.close()
        runtime.close()
        tracer.close()
    print_summary(summary, str(store), unpriced=sorted(runtime.prices.unpriced))


@app.command()
def grade(
    run_id: Annotated[str, typer.Argument(help="The stored run to re-score.")],
    store: StoreOpt = DEFAULT_STORE,
    judge_model: Annotated[
        str | None, typer.Option(help="Judge model (default: the one the run used).")
    ] = None,
    cache: CacheOpt = DEFAULT_CACHE,
    no_cache: NoCacheOpt = False,
    prices: PricesOpt = None,
    timeout: TimeoutOpt = 60.0,
    retries: RetriesOpt = 4,
) -> None:
    """Re-score a run's stored transcripts with the tasks' current checks, without simulating
    again; the new verdicts are stored beside the old ones."""
    import asyncio

    from harness.evaluate import regrade
    from harness.report.terminal import print_summary
    from harness.sim.suite import load_suite
    from harness.specs.agent import ModelRef
    from harness.specs.load import Location, SpecError
    from harness.store import Store

    results = Store(store) if store.is_file() else None
    info = results.run(run_id) if results else None
    with user_errors():
        if info is None:
            raise SpecError.at(Location(str(store)), "", f"no run {run_id!r} in the store")
        routed = split_overrides(info.config.get("overrides", []))
        personas = info.config.get("personas")
        cases = load_suite(
            [Path(p) for p in info.config["tasks"]],
            Path(personas) if personas else None,
            routed["task"],
            routed["persona"],
        )
        judge = (
            parse_model_option("--judge-model", judge_model)
            if judge_model
            else ModelRef.model_validate(info.config.get("judge_model") or DEFAULT_JUDGE)
        )
        runtime = build_runtime(cache, no_cache, prices, timeout, retries)
    assert results is not None
    try:
        summary = asyncio.run(regrade(results, run_id, cases, runtime, judge))
    finally:
        results.close()
        runtime.close()
    print_summary(summary, str(store), unpriced=sorted(runtime.prices.unpriced))


@app.command()
def validate(
    paths: Annotated[list[Path], typer.Argument(help="Spec files or folders to validate.")],
) -> None:
    """Validate task, persona, agent, DAG, gate and script files (kind from `kind:`)."""
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

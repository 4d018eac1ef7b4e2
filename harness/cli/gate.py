"""`harness gate`, `harness baseline` and `harness history`: the CI regression gate, the run it
compares with, and the trend of its decisions."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Literal

import typer

from harness import defaults
from harness.cli._common import (
    JsonOpt,
    StoreOpt,
    fail,
    json_stdout,
    make_console,
    print_json,
    user_errors,
)

baseline_app = typer.Typer(help="The run that gates compare candidates with.", no_args_is_help=True)


def gate(
    config: Annotated[Path, typer.Option(help="The gate's thresholds.")] = defaults.GATE_CONFIG,
    candidate: Annotated[
        str | None,
        typer.Option(
            help="The run to judge (default: the newest run of the baseline's suite and "
            "variant lineage by another variant than the baseline's)."
        ),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(help="The run to compare with (default: the stored baseline of the suite)."),
    ] = None,
    allow_suite_change: Annotated[
        bool,
        typer.Option(
            "--allow-suite-change",
            help="Compare runs of different suites (task ids and contents) on the tasks both "
            "played, listed; otherwise refused.",
        ),
    ] = False,
    play: Annotated[
        bool,
        typer.Option(
            "--play/--no-play",
            help="Play the evidence the gate needs before deciding (more trials of declined "
            "regression tasks, replays of episodes without evidence), up to the gate file's "
            "max_trials; --no-play decides on the stored runs, UNDECIDED where they cannot.",
        ),
    ] = True,
    candidate_agent: Annotated[
        Path | None,
        typer.Option(
            help="The candidate's agent file, to play its evidence with (default: the variant "
            "the run stored, when it still hashes the same)."
        ),
    ] = None,
    baseline_agent: Annotated[
        Path | None, typer.Option(help="The baseline's agent file, as --candidate-agent.")
    ] = None,
    junit: Annotated[Path | None, typer.Option(help="JUnit XML (default: the config's).")] = None,
    markdown: Annotated[
        Path | None, typer.Option(help="Markdown summary (default: the config's).")
    ] = None,
    store: StoreOpt = defaults.RESULTS_STORE,  # type: ignore[assignment]  # typer parses it
    as_json: JsonOpt = False,
) -> None:
    """The CI regression gate: may the candidate run replace the baseline?

    It decides on evidence only. First it plays what a rule needs, with the runs' own agents:
    more trials on both sides of a regression-tagged task that declined (up to the gate file's
    max_trials), episodes without evidence again, trials one side lacks. Then it decides once.

    Rules: episodes without evidence over max_error_rate; fewer than min_tasks tasks; level and
    tag floors; worse than the baseline (a one-sided sign-flip test over tasks); each
    regression-tagged task on its own (a one-sided Fisher exact test of its trials on both
    sides, so gains on other tasks never hide a broken one); cost and latency budgets; judge
    agreement. The tests share the gate file's alpha as one family (discrete Bonferroni).

    Exit 0 on PASS (every rule passed). Exit 1 on FAIL (each failed rule named with its figures)
    and on UNDECIDED (no rule failed but one could not decide even with the evidence played:
    never a pass; with on_undecided: warn in the gate file it exits 0, warning). Exit 2 on a bad
    config, missing runs, runs of different suites without --allow-suite-change, or trials one
    side lacks that could not be played. Writes JUnit XML and a Markdown summary; --json prints
    one JSON summary instead (both runs and the decision), with the same exit code."""
    from rich.markup import escape

    from harness.api.stored import gate_stored, stored_summary
    from harness.report.terminal import print_gate

    with user_errors(), json_stdout(as_json):
        done = gate_stored(
            store,
            config,
            candidate,
            baseline,
            junit,
            markdown,
            allow_suite_change,
            play,
            candidate_agent,
            baseline_agent,
        )
    result = done.result
    if as_json:
        ran = [result.candidate_run, *([result.baseline_run] if result.baseline_run else [])]
        print_json(stored_summary(store, ran, gates=[result], files=done.files))
        raise typer.Exit(1 if result.blocks else 0)
    console = make_console()
    if result.baseline_run is None:
        console.print(
            "[yellow]no baseline: only the error, task-count, floor and budget rules apply "
            "(harness baseline set RUN_ID)[/yellow]"
        )
    console.print(
        f"candidate {result.candidate_run} ({result.candidate_variant}) against baseline "
        f"{result.baseline_run or 'none'}"
    )
    for note in result.notes:
        console.print(f"  {escape(note)}")
    print_gate(result, console)
    for file in done.files:
        console.print(f"wrote {file}")
    raise typer.Exit(1 if result.blocks else 0)


@baseline_app.command("set")
def baseline_set(
    run_id: Annotated[str, typer.Argument(help="The run that production stands on.")],
    store: StoreOpt = defaults.RESULTS_STORE,  # type: ignore[assignment]  # typer parses it
) -> None:
    """Make a stored run the baseline of `harness gate` for its suite (the task ids it played
    and their content hashes): one baseline per suite."""
    from harness.gate.suites import SUITE_PREFIX, run_suite, suite_id
    from harness.store import Store

    results = Store(store) if store.exists() else None
    info = results.run(run_id) if results else None
    if results is None or info is None:
        fail(f"{store}: no run {run_id!r}")
    suite = run_suite(results, info)
    results.set_baseline(run_id, SUITE_PREFIX + suite_id(suite))
    results.close()
    typer.echo(
        f"baseline: {run_id} ({info.variant} {info.variant_hash}) for suite {suite_id(suite)} "
        f"of {len(suite)} tasks"
    )


@baseline_app.command("show")
def baseline_show(
    store: StoreOpt = defaults.RESULTS_STORE,  # type: ignore[assignment]  # typer parses it
) -> None:
    """Show each suite's baseline run and its pass rate, the most recently set first."""
    from harness.gate.suites import run_suite, suite_id
    from harness.report.summary import run_figures
    from harness.store import Store

    results = Store(store) if store.exists() else None
    baselines = results.baselines() if results else []
    if results is None or not baselines:
        fail(f"{store}: no baseline set (harness baseline set RUN_ID)")
    for _, run_id, set_at in baselines:
        info = results.run(run_id)
        if info is None:
            continue
        figures = run_figures(results, run_id)
        suite = run_suite(results, info)
        typer.echo(
            f"baseline: {run_id} ({figures.variant} {figures.variant_hash}), pass rate "
            f"{figures.rate:.1%} ({figures.passed}/{figures.graded} episodes, "
            f"{figures.interval_text}); suite {suite_id(suite)} of {len(suite)} "
            f"tasks, set {set_at}"
        )
    results.close()


class WandbMode(StrEnum):
    """Where `harness baseline publish` sends its W&B run."""

    OFFLINE = "offline"
    ONLINE = "online"


@baseline_app.command("publish")
def baseline_publish(
    suite: Annotated[
        str | None, typer.Option(help="Only this suite's baseline (the id `baseline set` printed).")
    ] = None,
    project: Annotated[str, typer.Option(help="W&B project.")] = "harness",
    entity: Annotated[str | None, typer.Option(help="W&B entity (team or user).")] = None,
    mode: Annotated[
        WandbMode | None,
        typer.Option(help="offline or online (default: $WANDB_MODE, else offline)."),
    ] = None,
    wandb_dir: Annotated[
        Path, typer.Option("--dir", help="Where the local W&B run folder is written.")
    ] = defaults.STATE_DIR,
    store: StoreOpt = defaults.RESULTS_STORE,  # type: ignore[assignment]  # typer parses it
) -> None:
    """Publish each suite's baseline and the gate history as a W&B artifact of type
    gate-baseline, for teams that keep everything in W&B. Offline by default: the files are
    written in the local run folder, and `wandb sync` uploads them."""
    from harness.api.baseline_artifact import publish_baselines
    from harness.specs.wandb import WandbTarget

    with user_errors():
        chosen: Literal["offline", "online"] | None = mode.value if mode else None
        target = WandbTarget(project=project, entity=entity, mode=chosen, dir=str(wandb_dir))
        done = publish_baselines(store, target, suite)
    where = f" in {done.run.directory}" if done.run.directory else ""
    typer.echo(
        f"published {done.artifact}: {done.baselines} baseline(s), {done.decisions} gate "
        f"decision(s); W&B run {done.run.run_id} ({done.run.mode}){where}"
    )


def history(
    store: StoreOpt = defaults.RESULTS_STORE,  # type: ignore[assignment]  # typer parses it
) -> None:
    """The trend of gated runs, per variant and week: the decisions, the pass rate with its 95%
    interval, and the drift of the week's newest gated run since the first baseline its gates
    used; a warning when that drift is significantly worse although every gate passed (a
    baseline moved with each candidate lets small drops add up)."""
    from rich.markup import escape
    from rich.table import Table

    from harness.gate import gate_trend
    from harness.store import Store

    if not store.exists():
        fail(f"{store}: no results store")
    results = Store(store)
    trend = gate_trend(results)
    results.close()
    table = Table(title="Gate history: pass rate per variant and week", title_justify="left")
    columns = ("variant", "week", "gates", "passed", "blocked", "pass rate (95% CI)", "drift")
    for column in columns:
        table.add_column(column, overflow="fold")
    for week in trend.weeks:
        rate = week.rate
        drift = "-"
        if week.drift is not None:
            d = week.drift.difference
            drift = (
                f"{d.difference:+.1%} ({d.low:+.1%} to {d.high:+.1%}, p = {d.p_worse:.3f}) "
                f"since {week.drift.reference}"
            )
        blocked = week.decisions - week.passed
        table.add_row(
            week.variant,
            week.week,
            str(week.decisions),
            str(week.passed),
            f"{blocked}" + (f" ({week.undecided} undecided)" if week.undecided else ""),
            f"{rate.estimate:.1%} ({rate.low:.1%}-{rate.high:.1%}, {rate.tasks} tasks)",
            drift,
        )
    console = make_console()
    console.print(table)
    for warning in trend.warnings:
        console.print(f"[yellow]warning: drift: {escape(warning)}[/yellow]")

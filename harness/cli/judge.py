"""`harness judge calibrate`: the judge's agreement with the human feedback on production
sessions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

import harness.cli.traces as session_options  # the session options of `traces to-tasks`
from harness import defaults
from harness.cli._common import fail, parse_model_option, store_option, user_errors
from harness.store_location import StoreLocation

judge_app = typer.Typer(help="The judge of llm_judge checks, measured.", no_args_is_help=True)


def _judge_checks(paths: list[Path]) -> list[tuple[Any, Any]]:
    """(task, check) for every check of the task files whose kind is decided by a judge
    (`uses_judge`: `llm_judge`, or a plug-in's); a `SpecError` for a bad one."""
    from harness.grading.checks import uses_judge
    from harness.specs.load import load_task
    from harness.specs.located import Location, SpecError

    found = []
    for path in paths:
        if not path.is_file():
            raise SpecError.at(Location(f"--check {path}"), "", "expected a task file")
        task = load_task(path).spec
        judged = [(task, c) for c in task.checks if uses_judge(c)]
        if not judged:
            raise SpecError.at(Location(str(path)), "checks", "no judge check to calibrate")
        found += judged
    return found


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


@judge_app.command("calibrate")
def judge_calibrate(
    check: Annotated[
        list[Path],
        typer.Option(help="A task file whose llm_judge checks grade the sessions (repeatable)."),
    ],
    judge_model: Annotated[
        str | None,
        typer.Option(help="The judge of checks that name no model: an id or a YAML mapping."),
    ] = None,
    source: session_options.SourceOpt = "local",
    store: session_options.TraceStoreOpt = defaults.TRACE_STORE,
    status: session_options.StatusOpt = "any",
    negative: session_options.NegativeOpt = False,
    op: session_options.OpOpt = None,
    thread: session_options.ThreadOpt = None,
    since: session_options.SinceOpt = None,
    until: session_options.UntilOpt = None,
    results_store: Annotated[
        StoreLocation | None,
        typer.Option(
            "--store",
            parser=store_option,
            metavar="FILE|URL",
            help="Keep the calibration in this results store, where a gate's "
            "min_judge_kappa finds it.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
) -> None:
    """Grade the production sessions that carry human feedback (good: a 👍 or a positive label;
    bad: a 👎, a note or a negative label) with llm_judge checks, and report the agreement:
    the confusion table, accuracy with its 95% interval, Cohen's kappa with its 95% interval
    (the gate's min_judge_kappa reads its lower end), and the judge's bias: its pass rate minus
    people's good rate (negative: stricter than people), with the precision and recall of its
    passes."""
    from harness.api.stored import open_store
    from harness.production.calibrate import calibrate, judge_key

    problems: list[Any] = []
    with user_errors():
        filters = session_options.session_filters(status, negative, op, thread, since, until)
        checks = _judge_checks(check)
        model = parse_model_option("--judge-model", judge_model)
        calls, close = session_options.open_source(source, store, filters, problems)
    try:
        found = calibrate(calls, filters, checks, model)
    finally:
        close()
    found.unreadable = problems + found.unreadable
    if not found.judged and not found.errors:
        fail(f"harness: no session with human feedback in {source} ({found.unlabelled} without)")
    if results_store is not None:
        judges = {judge_key(m) for _, c in checks if (m := c.model or model) is not None}
        if len(judges) != 1:
            fail("--store: give one judge (--judge-model) to calibrate and keep")
        with user_errors():
            results = open_store(results_store)
        try:
            report = json.dumps(found.as_json(), ensure_ascii=False)
            results.add_judge_calibration(
                judges.pop(), source, found.judged, found.kappa, found.accuracy, report
            )
        finally:
            results.close()
    if as_json:
        typer.echo(json.dumps(found.as_json(), indent=2, ensure_ascii=False))
        return
    t = found.table
    typer.echo(f"{'':12}{'human good':>12}{'human bad':>12}")
    typer.echo(f"{'judge pass':12}{t['pass_good']:>12}{t['pass_bad']:>12}")
    typer.echo(f"{'judge fail':12}{t['fail_good']:>12}{t['fail_bad']:>12}")
    low, high = found.interval
    kappa = "-" if found.kappa is None else f"{found.kappa:.2f}"
    if (kappa_interval := found.kappa_interval) is not None:
        kappa += f" (95% {kappa_interval[0]:.2f} to {kappa_interval[1]:.2f})"
    typer.echo(
        f"accuracy {_percent(found.accuracy)} (95% {low:.0%}-{high:.0%}, n={found.judged})  "
        f"kappa {kappa}"
    )
    if found.bias is not None and (bias_interval := found.bias_interval) is not None:
        sides = {-1: "stricter than", 0: "as strict as", 1: "more lenient than"}
        side = sides[(found.bias > 0) - (found.bias < 0)]
        typer.echo(
            f"bias {found.bias * 100:+.0f} points (95% {bias_interval[0] * 100:+.0f} to "
            f"{bias_interval[1] * 100:+.0f}): the judge passes {_percent(found.pass_rate)}, "
            f"people marked {_percent(found.good_rate)} good ({side} people);  "
            f"precision {_percent(found.precision)} of its passes were good, "
            f"recall {_percent(found.recall)} of the good sessions passed"
        )
    for key, why in found.errors:
        typer.echo(f"error {key}: {why}", err=True)
    for problem in found.unreadable:
        typer.echo(f"{getattr(problem, 'label', 'unreadable')} {problem}", err=True)
    typer.echo(
        f"{found.judged} judged, {len(found.errors)} judge error(s) left out, "
        f"{found.unlabelled} without human feedback"
    )

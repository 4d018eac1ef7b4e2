"""`harness climb CONFIG` and `harness climb show CLIMB_ID`: hill climbing on agent variants."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness import defaults
from harness.cli._common import (
    CacheOpt,
    NoCacheOpt,
    StoreOpt,
    UnsafeCheckersOpt,
    fail,
    user_errors,
)
from harness.cli._executor import ExecutorOpt, WorkersOpt, executor_name
from harness.store_location import StoreLocation


def climb(
    config: Annotated[str, typer.Argument(help="A climb file, or `show` to show a climb.")],
    climb_id: Annotated[str | None, typer.Argument(help="With `show`: the climb's id.")] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a field of the climb, PATH=VALUE.")
    ] = None,
    resume: Annotated[
        str | None, typer.Option(help="Resume an interrupted climb (its id).")
    ] = None,
    store: StoreOpt = defaults.RESULTS_STORE,  # type: ignore[assignment]  # typer parses it
    cache: CacheOpt = defaults.RESPONSE_CACHE,
    no_cache: NoCacheOpt = False,
    no_traces: Annotated[bool, typer.Option("--no-traces", help="Record no traces.")] = False,
    executor: ExecutorOpt = None,
    workers: WorkersOpt = None,
    unsafe_checkers: UnsafeCheckersOpt = False,
) -> None:
    """Propose variants from failing transcripts (GEPA), evaluate them against production, and
    ship only a candidate the gate finds better on held-out tasks. Exit 0 when one shipped,
    1 when none did (the reasons are printed)."""
    if config == "show":
        show(climb_id, store)
        return
    from harness.api.pipeline import RunOptions
    from harness.climb import run_climb
    from harness.project import use_project_of
    from harness.specs.load import load_climb
    from harness.specs.overrides import Override

    options = RunOptions(
        store=store,
        cache=None if no_cache else cache,
        traces=None if no_traces else defaults.TRACE_STORE,
        progress=False,
        executor=executor_name(executor),
        workers=workers,
        unsafe_checkers=unsafe_checkers,
    )
    with user_errors():
        use_project_of(Path(config))
        loaded = load_climb(Path(config), [Override.parse(o) for o in set_ or []])
        outcome = run_climb(loaded, options, resume or "", typer.echo)
    from harness.climb.split import plural, split_text

    found, decision = outcome.search, outcome.acceptance
    candidates = plural(found.candidates, "candidate")
    typer.echo(
        f"climb {found.climb_id}: {candidates}, {found.episodes} episodes, "
        f"${found.spent_usd + found.reflection_usd:.4f}; stopped by {found.stopped_by}"
    )
    typer.echo(f"{split_text(found.split, final=True)}.")
    for line in decision.evidence:
        typer.echo(line)
    verdict = "SHIPPED" if decision.accepted else "NOT SHIPPED"
    typer.echo(f"{verdict}: " + "; ".join(decision.reasons))
    if outcome.variant_file is not None:
        typer.echo(f"wrote {outcome.variant_file}")
    if outcome.wandb is not None and outcome.wandb.directory:
        typer.echo(f"W&B run ({outcome.wandb.mode}): {outcome.wandb.directory}")
    typer.echo(f"every candidate: harness climb show {found.climb_id}")
    raise typer.Exit(0 if decision.accepted else 1)


def show(climb_id: str | None, store: StoreLocation) -> None:
    """A stored climb: its decision and every candidate (parent, status, evaluations, diff);
    without an id, the newest climbs."""
    from harness.climb.show import climb_text, climbs_text
    from harness.store import Store

    if not store.exists():
        fail(f"{store}: no results store (run a climb first)")
    with user_errors():
        results = Store(store)
    try:
        text = climb_text(results, climb_id) if climb_id else climbs_text(results)
    finally:
        results.close()
    if text is None:
        fail(f"{store}: no climb {climb_id!r} (`harness climb show` lists them)")
    typer.echo(text)

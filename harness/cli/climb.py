"""`harness climb CONFIG` and `harness climb show CLIMB_ID`: hill climbing on agent variants."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness import defaults
from harness.cli._common import CacheOpt, NoCacheOpt, StoreOpt, fail, user_errors


def climb(
    config: Annotated[str, typer.Argument(help="A climb file, or `show` to show a climb.")],
    climb_id: Annotated[str | None, typer.Argument(help="With `show`: the climb's id.")] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a field of the climb, PATH=VALUE.")
    ] = None,
    resume: Annotated[
        str | None, typer.Option(help="Resume an interrupted climb (its id).")
    ] = None,
    store: StoreOpt = defaults.RESULTS_STORE,
    cache: CacheOpt = defaults.RESPONSE_CACHE,
    no_cache: NoCacheOpt = False,
    no_traces: Annotated[bool, typer.Option("--no-traces", help="Record no traces.")] = False,
) -> None:
    """Propose variants from failing transcripts (GEPA), evaluate them against production, and
    ship only a candidate the gate finds better on held-out tasks. Exit 0 when one shipped,
    1 when none did (the reasons are printed)."""
    if config == "show":
        show(climb_id)
        return
    from harness.climb import run_climb
    from harness.pipeline.runner import RunOptions
    from harness.specs.load import load_climb
    from harness.specs.overrides import Override

    options = RunOptions(
        store=store,
        cache=None if no_cache else cache,
        traces=None if no_traces else defaults.TRACE_STORE,
        progress=False,
    )
    with user_errors():
        loaded = load_climb(Path(config), [Override.parse(o) for o in set_ or []])
        outcome = run_climb(loaded, options, resume or "", typer.echo)
    found, decision = outcome.search, outcome.acceptance
    typer.echo(
        f"climb {found.climb_id}: {found.candidates} candidates, {found.episodes} episodes, "
        f"${found.spent_usd + found.reflection_usd:.4f}; stopped by {found.stopped_by}"
    )
    for line in decision.evidence:
        typer.echo(line)
    verdict = "SHIPPED" if decision.accepted else "NOT SHIPPED"
    typer.echo(f"{verdict}: " + "; ".join(decision.reasons))
    if outcome.variant_file is not None:
        typer.echo(f"wrote {outcome.variant_file}")
    raise typer.Exit(0 if decision.accepted else 1)


def show(climb_id: str | None) -> None:
    """Every candidate of a climb: its parent chain, scores per evaluation, and its changes."""
    import json

    import yaml

    if climb_id is None:
        fail("harness climb show: give the climb's id")
    ledger = defaults.STATE_DIR / "climbs" / climb_id / "evaluations.jsonl"
    if not ledger.is_file():
        fail(f"harness climb show: no climb {climb_id!r} in {ledger.parent.parent}")
    seen: dict[str, dict] = {}
    for line in ledger.read_text().splitlines():
        entry = json.loads(line)
        current = seen.setdefault(entry["candidate"], {"changes": entry["changes"], "runs": []})
        mean = sum(entry["scores"].values()) / max(len(entry["scores"]), 1)
        current["runs"].append(f"{entry['run_id']}: {mean:.0%} on {len(entry['scores'])} tasks")
    typer.echo(yaml.safe_dump(seen, sort_keys=False, allow_unicode=True, width=100))

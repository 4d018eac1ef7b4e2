"""`fidelity`: the sim-to-real report of a run's simulated users against production's users
(`harness fidelity` as a node), kept with the run so that the HTML report shows it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from harness import defaults
from harness.pipeline.nodes import NodeContext, NodeKind, register
from harness.pipeline.types import Episodes, Fidelity, Graded
from harness.specs.base import Spec


class FidelityParams(Spec):
    """Where production's sessions are read from, and the bootstrap."""

    against: str = Field(
        default="local",
        description="The production sessions: `local` (the trace store), "
        "`weave:ENTITY/PROJECT`, or a `.jsonl` export of calls.",
    )
    trace_store: str = Field(
        default=str(defaults.TRACE_STORE), description="The local trace store (`local`)."
    )
    since: str | None = Field(
        default=None, description="Only sessions started at or after: ISO or an age (30d)."
    )
    bootstrap: int = Field(default=1000, ge=100, le=100_000, description="Bootstrap resamples.")
    seed: int = Field(default=0, description="Seed of the bootstrap.")


def check(params: FidelityParams) -> None:
    """The production source exists and `since` reads, before anything runs."""
    from harness.production.calls import parse_when
    from harness.specs.located import Location, SpecError

    where = Location(f"fidelity node: against {params.against}")
    if params.against == "local":
        if not Path(params.trace_store).is_file():
            raise SpecError.at(where, "", f"no local trace store at {params.trace_store}")
    elif not params.against.startswith("weave:") and not Path(params.against).is_file():
        raise SpecError.at(where, "", "expected local, weave:ENTITY/PROJECT or a .jsonl file")
    if params.since is not None:
        try:
            parse_when(params.since)
        except ValueError as exc:
            where = Location(f"fidelity node: since {params.since}")
            raise SpecError.at(where, "", str(exc)) from None


async def run(params: FidelityParams, inputs: list[Any], ctx: NodeContext) -> Fidelity:
    from harness.fidelity import run_fidelity
    from harness.production.behaviour import measure_calls
    from harness.production.calls import Filters, parse_when
    from harness.production.sources import open_calls

    (played,) = inputs
    filters = Filters(since=parse_when(params.since) if params.since else None)
    problems: list[Any] = []
    calls, close = open_calls(
        params.against, Path(params.trace_store), filters, problems, "fidelity.against"
    )
    try:
        production = list(measure_calls(calls, problems, filters=filters))
    finally:
        close()
    if not production:
        raise ValueError(f"fidelity: no production sessions in {params.against}")
    report = run_fidelity(
        ctx.store, played.run_id, production, params.against, params.bootstrap, params.seed
    )
    ctx.store.add_fidelity(played.run_id, params.against, report.model_dump_json())
    return Fidelity(
        run_id=played.run_id,
        source=params.against,
        index=report.index,
        interval=report.interval,
        easy_mode=report.easy_mode,
    )


register(
    NodeKind(
        "fidelity",
        FidelityParams,
        ((Episodes, Graded),),
        Fidelity,
        run,
        always_run=True,
        check=check,
    )
)

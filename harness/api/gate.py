"""The CI gate as one library call: the runs it compares (given, or chosen: `choose_runs`),
checked arguments, a store and model runtime opened and closed; the evidence and the decision
are `harness.gate.play.gate_async`'s, which `harness gate`, the pipeline's `gate` node and the
climb's acceptance share."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from harness import defaults
from harness.api.agent import Agent, as_agent
from harness.api.decide import run_id_of
from harness.api.evaluate import open_runtime, run_sync
from harness.api.results import RunResult
from harness.engine.context import Engine
from harness.engine.progress import Board
from harness.gate import GateResult, load_gate_config
from harness.gate.play import gate_async
from harness.gate.suites import choose_runs
from harness.options import GateOptions, checked, refused
from harness.specs.gate import Gate
from harness.store import Store
from harness.store.tasks import played_tasks
from harness.store_location import StoreTarget
from harness.tracing import NO_TRACER


def _agent(agent: Agent | str | os.PathLike[str] | None, name: str) -> Agent | None:
    return None if agent is None else as_agent(agent, "gate", name)


def _config(config: object) -> Gate:
    if isinstance(config, Gate):
        return config
    if isinstance(config, str | os.PathLike):
        return load_gate_config(Path(config))
    raise refused("gate", "config", "a Gate or a gate file (a path)", config)


def gate(
    candidate: RunResult | str | None,
    baseline: RunResult | str | None = None,
    *,
    config: str | os.PathLike[str] | Gate = defaults.GATE_CONFIG,
    store: StoreTarget | None = None,
    allow_suite_change: bool = False,
    play: bool = True,
    candidate_agent: Agent | str | os.PathLike[str] | None = None,
    baseline_agent: Agent | str | os.PathLike[str] | None = None,
    progress: bool | None = False,
) -> GateResult:
    """The CI gate's decision on a candidate run against a baseline run (the absolute rules
    alone without one; without a candidate, the newest run of the baseline's suite and lineage
    by another variant). Before deciding it plays the evidence it needs with the runs' agents
    (their stored variants, or `candidate_agent`/`baseline_agent`: files or loaded agents),
    unless `play` is false; what is still undecided makes the gate UNDECIDED, never a pass.
    `progress`: True shows a live board of what it plays, None a live board on a terminal and
    a line every tenth elsewhere, False nothing. The decision joins the store's gate
    history. `allow_suite_change`, `play` and `progress` are booleans (`GateOptions`); runs are
    `RunResult`s or run ids, agents `Agent`s or files, `config` a `Gate` or its file: anything
    else is `BadOptions` (and a `TypeError`) naming the argument. In a notebook the decision
    shows itself with every rule, its figures and verdict, and the evidence played."""
    checked(
        GateOptions, "gate", allow_suite_change=allow_suite_change, play=play, progress=progress
    )
    run = run_id_of(candidate, "gate", "candidate") if candidate is not None else None
    base = run_id_of(baseline, "gate", "baseline") if baseline is not None else None
    agents = _agent(candidate_agent, "candidate_agent"), _agent(baseline_agent, "baseline_agent")
    rules = _config(config)
    runs = [given for given in (candidate, baseline) if given is not None]
    target = store if store is not None else _store_of(runs)

    async def decided() -> GateResult:  # on the thread that runs it: SQLite's rule
        opened, runtime = Store(target), open_runtime()
        try:
            notes: list[str] = []
            compared, against = run, base
            if compared is None:
                chosen = choose_runs(opened, None, against, allow_suite_change)
                compared, against, notes = chosen.candidate, chosen.baseline, chosen.notes
            info = opened.run(compared)
            if info is None:
                raise LookupError(f"no run {compared!r} in {opened.path}")
            with Board(enabled=progress) as board:
                engine = Engine(opened, runtime, NO_TRACER, board)
                return await gate_async(
                    engine,
                    rules,
                    compared,
                    against,
                    played_tasks(opened, info),
                    allow_suite_change=allow_suite_change,
                    notes=notes,
                    play=play,
                    candidate_agent=agents[0].loaded if agents[0] else None,
                    baseline_agent=agents[1].loaded if agents[1] else None,
                )
        finally:
            await runtime.aclose()
            runtime.close()
            opened.close()

    return run_sync(decided())


def _store_of(runs: Sequence[RunResult | str]) -> StoreTarget:
    """The store of the first `RunResult` given, else the default."""
    for run in runs:
        if isinstance(run, RunResult):
            return run.store
    return defaults.RESULTS_STORE

"""The CI gate as one library call: the runs it compares, the evidence it plays before it
decides (`harness.gate.evidence`: more trials of declined regression tasks, replays of episodes
without evidence, top-ups of trials one side lacks), and its decision. `harness gate`, the
pipeline's `gate` node and `harness.gate(...)` all decide here.

The evidence is played with the runs' own agents and tasks: each stored run records its variant
(and the gate checks that the variant still hashes the same: the same prompt, code and files)
and how its tasks were loaded; or the agents are given. The new episodes go into evidence runs
of their own (`gate-evidence/...`), graded as the runs were graded (their judge, their sandbox
permission); the compared runs are never changed, and a gate run again finds the evidence it
played before.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import defaults
from harness.api.agent import Agent, as_agent
from harness.api.decide import run_id_of
from harness.api.evaluate import open_runtime, run_sync
from harness.api.results import RunResult
from harness.compare import GradedEpisodes
from harness.engine.context import Engine
from harness.engine.grade import claim_grading, grade_run
from harness.engine.play import play_trials
from harness.engine.progress import Board
from harness.gate import (
    GateResult,
    decide,
    load_compared,
    load_gate_config,
)
from harness.gate.evidence import (
    EVIDENCE_FOR,
    Plan,
    Play,
    Round,
    gather,
    record,
    settled,
    stored_rounds,
)
from harness.gate.suites import choose_runs, run_suite
from harness.options import GateOptions, checked, refused
from harness.sim.agent import check_agent
from harness.sim.suite import TaskCase
from harness.sim.taskset import LoadTasksParams, load_task_set
from harness.specs.agent import AgentVariant, ModelRef
from harness.specs.gate import Gate
from harness.specs.load import Loaded
from harness.specs.located import Location, SpecError
from harness.store import PlayedTask, RunInfo, Store
from harness.store.tasks import played_tasks
from harness.store_location import StoreTarget
from harness.tracing import NO_TRACER


class CannotPlay(Exception):
    """Why the gate cannot play more episodes of a run: it decides on what is stored."""


GIVE = "give the agent file that played it: --candidate-agent / --baseline-agent"


@dataclass
class Player:
    """What plays more episodes of one stored run as the run played them: its variant, its
    tasks, and the judge and sandbox permission its verdicts were graded with."""

    info: RunInfo
    variant: AgentVariant
    cases: dict[str, TaskCase]
    judge: ModelRef | None
    unsafe_checkers: bool

    async def play(
        self, engine: Engine, trials: dict[str, list[int]], against: str, wanted: Plan, round_: int
    ) -> GradedEpisodes:
        """Play and grade the trials in an evidence run of this run, resumed if a gate that
        planned the same round died; its graded episodes."""
        config = self.info.config
        suite = run_suite(engine.store, self.info)
        cases = [self.cases[task] for task in trials]
        evidence: dict[str, Any] = {
            key: config[key] for key in ("agent", "overrides", "tasks", "lineage") if key in config
        }
        evidence |= {
            "variant": self.variant.model_dump(mode="json"),
            "suite": {task: suite.get(task, "") for task in trials},
            "trials": max(len(numbers) for numbers in trials.values()),
            EVIDENCE_FOR: self.info.id,
            "against": against,
            "round": round_,
            "why": {task: sorted(why) for task, why in wanted.why.items() if task in trials},
        }
        key = f"gate-evidence/{self.info.id}/{against}/{round_}"
        pairs = [(self.cases[task], trial) for task, numbers in trials.items() for trial in numbers]
        side = dataclasses.replace(
            engine, unsafe_checkers=engine.unsafe_checkers or self.unsafe_checkers
        )
        label = f"gate evidence {self.info.variant} round {round_}"
        played = await play_trials(side, cases, self.variant, evidence, pairs, key=key, label=label)
        grading = f"gate-evidence/{played.run_id}"
        run_id = claim_grading(side, played.run_id, self.judge, grading)
        await grade_run(side, run_id, cases, self.judge, grading, label=f"{label}: grade")
        return GradedEpisodes.load(engine.store, run_id)


def player(store: Store, run_id: str, agent: Agent | None, cases: Sequence[PlayedTask]) -> Player:
    """The player of a stored run, or `CannotPlay` saying why not: a variant that no longer
    hashes as the run's did (a file it names changed), or task files that changed."""
    info = store.run(run_id)
    assert info is not None  # loaded by the gate already
    if agent is not None:
        if agent.content_hash != info.variant_hash:
            raise SpecError.at(
                Location(str(agent.path)),
                "",
                f"this agent is not the variant run {run_id} played (content hash "
                f"{agent.content_hash[:12]}, the run's {info.variant_hash[:12]}): the gate plays "
                "more trials of the same variant only",
            )
        loaded = agent.loaded
    else:
        loaded = _stored_variant(info)
    tasks = _stored_cases(store, info, cases)
    judge = info.config.get("judge_model")
    return Player(
        info,
        loaded.spec,
        tasks,
        ModelRef.model_validate(judge) if judge else None,
        store.unsandboxed_verdicts(run_id) > 0,
    )


def _stored_variant(info: RunInfo) -> Loaded[AgentVariant]:
    recorded = info.config.get("variant")
    if not isinstance(recorded, dict):
        raise CannotPlay(f"run {info.id} records no agent variant ({GIVE})")
    try:
        variant = AgentVariant.model_validate(recorded)
        found = variant.content_hash()
        loaded = check_agent(Loaded(variant, Path(str(info.config.get("agent", "")))))
    except Exception as exc:  # a file it names is gone, a provider no longer registered
        raise CannotPlay(
            f"run {info.id}'s agent variant cannot be loaded here: {exc} ({GIVE})"
        ) from exc
    if found != info.variant_hash:
        raise CannotPlay(
            f"run {info.id}'s agent variant no longer hashes the same (a file it names changed: "
            f"{found[:12]}, the run's {info.variant_hash[:12]}); {GIVE}"
        )
    return loaded


def _stored_cases(store: Store, info: RunInfo, cases: Sequence[PlayedTask]) -> dict[str, TaskCase]:
    """The run's tasks, loaded: the gate's cases when they are (a pipeline's), else loaded
    again as the run loaded them, each with the content the run played."""
    if cases and all(isinstance(case, TaskCase) for case in cases):
        return {case.task.id: case for case in cases if isinstance(case, TaskCase)}
    try:
        found = load_task_set(LoadTasksParams.model_validate(info.config["tasks"]))
    except Exception as exc:  # the task files are gone or no longer load
        raise CannotPlay(f"run {info.id}'s tasks cannot be loaded again: {exc}") from exc
    played = run_suite(store, info)
    changed = [
        task
        for task, digest in played.items()
        if digest and found.task_hashes.get(task, digest) != digest
    ]
    if changed:
        raise CannotPlay(f"task files changed since run {info.id}: {', '.join(changed)}")
    return {case.task.id: case for case in found.cases}


def players(
    store: Store,
    candidate_run: str,
    baseline_run: str,
    agents: tuple[Agent | None, Agent | None],
    cases: Sequence[PlayedTask],
    engine: Engine,
) -> tuple[Play | None, str]:
    """How the gate plays both sides' evidence, or None and why it cannot."""
    try:
        sides = (
            player(store, candidate_run, agents[0], cases),
            player(store, baseline_run, agents[1], cases),
        )
    except CannotPlay as exc:
        return None, str(exc)

    async def play(wanted: Plan, round_: int) -> Round:
        async def one(side: Player, trials: dict[str, list[int]], against: str) -> Any:
            return await side.play(engine, trials, against, wanted, round_) if trials else None

        candidate, baseline = await asyncio.gather(
            one(sides[0], wanted.candidate, baseline_run),
            one(sides[1], wanted.baseline, candidate_run),
        )
        runs = [side.run_id if side else None for side in (candidate, baseline)]
        return Round(record(wanted, round_, *runs), candidate, baseline)

    return play, ""


async def gate_async(
    engine: Engine,
    config: Gate,
    candidate_run: str,
    baseline_run: str | None,
    cases: Sequence[PlayedTask],
    *,
    allow_suite_change: bool = False,
    notes: Sequence[str] = (),
    play: bool = True,
    candidate_agent: Agent | None = None,
    baseline_agent: Agent | None = None,
) -> GateResult:
    """The gate's decision on two stored runs, after playing the evidence it needs (unless
    `play` is false: then it decides on what is stored and names what it would have played);
    it joins the store's gate history."""
    store = engine.store
    compared = load_compared(store, candidate_run, baseline_run, cases, allow_suite_change, notes)
    if compared.baseline is None:
        return decide(store, config, compared, None)
    rounds = stored_rounds(store, candidate_run, compared.baseline.run_id)
    gathered = settled(config, compared.candidate, compared.baseline, compared.cases, rounds)
    why_not = "the gate was asked not to play (--no-play)"
    if play and gathered.unplayed is not None:  # the runs' players are loaded only when needed
        agents = (candidate_agent, baseline_agent)
        player_, why_not = players(
            store, candidate_run, compared.baseline.run_id, agents, compared.cases, engine
        )
        if player_ is not None:
            gathered = await gather(
                config, compared.candidate, compared.baseline, compared.cases, player_, rounds
            )
    return decide(store, config, compared, gathered, why_not)


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
                    candidate_agent=agents[0],
                    baseline_agent=agents[1],
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

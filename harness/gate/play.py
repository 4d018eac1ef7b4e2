"""The gate's evidence, played: more episodes of each compared run, as the run played them
(its stored variant, or the agent given, checked to hash the same; its tasks, checked unchanged;
the judge and sandbox permission its verdicts were graded with), into evidence runs of their own
(`gate-evidence/...`); then the decision on everything. `harness.api.gate`, the pipeline's
`gate` node and the climb's acceptance all decide here (`gate_async`).

The compared runs are never changed, and a gate run again finds the evidence it played before.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.compare import GradedEpisodes
from harness.engine.context import Engine
from harness.engine.grade import claim_grading, grade_run
from harness.engine.play import play_trials
from harness.gate import GateResult, decide, load_compared
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
from harness.gate.suites import run_suite
from harness.sim.agent import check_agent
from harness.sim.suite import TaskCase
from harness.sim.taskset import LoadTasksParams, load_task_set
from harness.specs.agent import AgentVariant, ModelRef
from harness.specs.gate import Gate
from harness.specs.load import Loaded
from harness.specs.located import Location, SpecError
from harness.store import PlayedTask, RunInfo, Store


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


def player(
    store: Store, run_id: str, agent: Loaded[AgentVariant] | None, cases: Sequence[PlayedTask]
) -> Player:
    """The player of a stored run, or `CannotPlay` saying why not: a variant that no longer
    hashes as the run's did (a file it names changed), or task files that changed."""
    info = store.run(run_id)
    assert info is not None  # loaded by the gate already
    if agent is not None:
        given = agent.spec.content_hash()
        if given != info.variant_hash:
            raise SpecError.at(
                Location(str(agent.path)),
                "",
                f"this agent is not the variant run {run_id} played (content hash "
                f"{given[:12]}, the run's {info.variant_hash[:12]}): the gate plays "
                "more trials of the same variant only",
            )
        loaded = agent
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
    agents: tuple[Loaded[AgentVariant] | None, Loaded[AgentVariant] | None],
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
    candidate_agent: Loaded[AgentVariant] | None = None,
    baseline_agent: Loaded[AgentVariant] | None = None,
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

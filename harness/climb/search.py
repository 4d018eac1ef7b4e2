"""`harness climb`: GEPA searches for a better variant on the train tasks; the best candidate
ships only if the gate, on held-out validation tasks with fresh seeds, says it is better than
production and regresses nothing."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from harness.api.agent import load_agent
from harness.climb.adapter import ClimbContext, HarnessAdapter
from harness.climb.candidates import CandidateVariants, candidate_id, changes, seed_candidate
from harness.climb.records import ClimbRecorder, Progress
from harness.climb.session import ClimbSession, check_options
from harness.climb.split import (
    Split,
    nothing_to_learn,
    require_both_sides,
    split_line,
    split_tasks,
)
from harness.defaults import STATE_DIR
from harness.grading.requirements import missing_isolation, missing_judge, resolve_judge
from harness.models import CompletionParams
from harness.pipeline.runner import RunOptions
from harness.sim.suite import TaskCase
from harness.sim.taskset import LoadTasksParams, load_task_set
from harness.specs.agent import ModelRef
from harness.specs.climb import Climb
from harness.specs.load import Loaded
from harness.specs.located import SpecError
from harness.specs.overrides import Override
from harness.store import new_id
from harness.transcript import Message

if TYPE_CHECKING:
    from gepa import GEPAResult


@dataclass
class SearchResult:
    """What the search found before acceptance."""

    climb_id: str
    split: Split
    best: dict[str, Any]  # the best candidate's changes to production ({} when none won)
    lineage: list[str]  # candidate ids from production to the best
    candidates: int
    episodes: int
    spent_usd: float
    reflection_usd: float
    stopped_by: str
    reflection: Reflection = field(repr=False)
    adapter: HarnessAdapter = field(repr=False)
    context: ClimbContext = field(repr=False)
    recorder: ClimbRecorder = field(repr=False)
    # production passed every train task: the search stopped before proposing anything
    nothing_to_learn: bool = False

    @property
    def session(self) -> ClimbSession:
        return self.context.session


def require_judge(cases: list[TaskCase], loaded: Loaded[Climb], judge: ModelRef | None) -> None:
    """Tasks with checks that need the run's judge need one (the climb's, `--judge-model` or
    the project's): without it, every evaluation would grade them as errors, so the climb
    stops first."""
    if judge is not None:
        return
    missing = missing_judge(cases)
    if missing is not None:
        fix = "set judge_model here or in harness.yaml, or give the check a model"
        raise SpecError([loaded.problem(("judge_model",), f"{missing}: {fix}")])


def require_isolation(cases: list[TaskCase], loaded: Loaded[Climb], unsafe: bool) -> None:
    """Tasks with python checks need OS isolation here (or `--unsafe-checkers`): without it,
    every evaluation would refuse them, so the climb stops first."""
    missing = missing_isolation(cases, unsafe)
    if missing is not None:
        raise SpecError([loaded.problem(("tasks",), missing)])


class PassesEveryTrainTask:
    """A stop condition of the search: production (GEPA's seed, evaluated on the whole train
    set before the first proposal) passed every train task in every trial. Said once, plainly,
    in the progress."""

    def __init__(self, train: int, trials: int, progress: Progress):
        self.train, self.trials, self.progress = train, trials, progress
        self.stopped = False

    def __call__(self, state: Any) -> bool:
        if not self.stopped:
            scores = state.prog_candidate_val_subscores[0]  # the seed's, by train task
            self.stopped = len(scores) == self.train and all(s >= 1.0 for s in scores.values())
            if self.stopped:
                self.progress(f"search stopped: {nothing_to_learn(self.train, self.trials)}")
        return self.stopped


def search(
    loaded: Loaded[Climb],
    options: RunOptions,
    climb_id: str = "",
    progress: Progress = lambda line: None,
) -> SearchResult:
    """Run (or resume, with the same `climb_id`) GEPA's search on the train tasks. Every
    evaluation runs in one session (`found.session`, which the caller closes): bad input is
    found before it opens."""
    config, base = loaded.spec, loaded.path.parent
    climb_id = climb_id or new_id("climb-")
    production_file = (base / config.production).resolve()
    production = load_agent(production_file, config.overrides)
    params = LoadTasksParams(
        paths=[str(base / p) for p in config.tasks.paths],
        personas=str(base / config.tasks.personas) if config.tasks.personas else None,
    )
    suite = load_task_set(params)
    cases = suite.cases
    # Without a judge of its own, the climb grades with the run's (`--judge-model`) or project's.
    where = loaded.where("judge_model")
    judge = resolve_judge(config.judge_model, where, "judge_model", options.judge_model)
    require_judge(cases, loaded, judge)
    require_isolation(cases, loaded, options.unsafe_checkers)
    seed = seed_candidate(production.variant, config.components, tool_docs(cases, loaded))
    split = split_tasks(cases, config.tasks)
    require_both_sides(split, cases, loaded)
    overrides = [Override.parse_in(o, "agent") for o in config.overrides]
    variants = CandidateVariants(production_file, config.name, overrides, cases)
    variants.variant(candidate_id({}), {})  # production plays these tasks: checked before
    check_options(options)
    lineage = production.lineage()
    session = ClimbSession(options, judge)  # the store: the first thing written
    try:
        context = ClimbContext(
            config, base, production_file, seed, suite, variants, lineage, session
        )
        return _search(loaded, context, split, climb_id, progress)
    except BaseException:
        session.close()
        raise


def _search(
    loaded: Loaded[Climb],
    context: ClimbContext,
    split: Split,
    climb_id: str,
    progress: Progress,
) -> SearchResult:
    import gepa
    from gepa.utils.stop_condition import MaxCandidateProposalsStopper, TimeoutStopCondition

    config, seed = loaded.spec, context.seed
    workdir = STATE_DIR / "climbs" / climb_id
    workdir.mkdir(parents=True, exist_ok=True)
    adapter = HarnessAdapter(context)
    reflection = Reflection(config, context.session)
    recorder = ClimbRecorder(
        context.session.store,
        climb_id,
        config,
        seed,
        str(context.production_file),
        progress,
        lambda: adapter.spent_usd + reflection.spent,
        len(split.train),
    )
    context.recorder = recorder
    budget_usd = config.budget.usd if config.budget.usd is not None else float("inf")
    perfect = PassesEveryTrainTask(len(split.train), config.trials, progress)
    stoppers: list[Any] = [
        perfect,
        lambda state: reflection.spent + adapter.spent_usd > budget_usd,
    ]
    if config.budget.minutes is not None:
        stoppers.append(TimeoutStopCondition(config.budget.minutes * 60))
    if config.budget.candidates is not None:
        stoppers.append(MaxCandidateProposalsStopper(config.budget.candidates))
    progress(split_line(climb_id, split))
    started = time.monotonic()
    result: GEPAResult[Any, Any] = gepa.optimize(
        seed_candidate=seed,
        trainset=split.train,
        valset=split.train,
        adapter=adapter,
        # gepa's LanguageModel may also be given chat messages: only for images in the
        # reflective dataset, which the climb's feedback never holds
        reflection_lm=reflection,  # type: ignore[arg-type]
        reflection_minibatch_size=min(config.minibatch, len(split.train)),
        max_metric_calls=max(config.budget.episodes // config.trials, 1),
        stop_callbacks=stoppers,
        run_dir=str(workdir / "gepa"),
        seed=config.seed,
        raise_on_exception=True,
        logger=FileLog(workdir / "gepa.log"),
        # GEPACallback is a Protocol of every hook, though gepa calls only those defined
        callbacks=[recorder],  # type: ignore[list-item]
    )
    # a str only from gepa.optimize_anything given a str seed; optimize's are dicts
    best = changes(cast(dict[str, str], result.best_candidate), seed, config.components)
    found = SearchResult(
        climb_id=climb_id,
        split=split,
        best=best,
        lineage=_lineage(result, seed, config),
        candidates=len(result.candidates),
        episodes=adapter.episodes_played,
        spent_usd=adapter.spent_usd,
        reflection_usd=reflection.spent,
        stopped_by="",
        reflection=reflection,
        adapter=adapter,
        context=context,
        recorder=recorder,
        nothing_to_learn=perfect.stopped,
    )
    found.stopped_by = _stop_reason(found, time.monotonic() - started)
    return found


def tool_docs(cases: list[TaskCase], loaded: Loaded[Climb]) -> dict[str, str]:
    """The domain's description of each tool whose description may change; a tool no task's
    domain has is bad input."""
    docs: dict[str, str] = {}
    for case in cases:
        docs |= {spec.name: spec.description for spec in case.domain.tool_specs()}
    for index, name in enumerate(loaded.spec.components.tool_descriptions):
        if name not in docs:
            known = ", ".join(sorted(docs))
            message = f"no task's domain has a tool '{name}'; known: {known}"
            raise SpecError([loaded.problem(("components", "tool_descriptions", index), message)])
    return docs


class FileLog:
    """GEPA's own log, kept in the climb's folder instead of the terminal."""

    def __init__(self, path: Path):
        self.path = path

    def log(self, message: str) -> None:
        with self.path.open("a", encoding="utf-8") as out:
            out.write(message + "\n")


class Reflection:
    """The reflection model as GEPA calls it (`prompt -> text`), through the climb's runtime
    and event loop: cached, retried, costed."""

    def __init__(self, config: Climb, session: ClimbSession):
        self.session = session
        self.model = session.runtime.model(config.reflection_model, role="reflection")
        self.spent = 0.0
        self.calls = 0
        self.seconds = 0.0

    def __call__(self, prompt: str) -> str:
        started = time.perf_counter()
        completion = self.session.run(
            self.model.complete(
                [Message(role="user", content=prompt)], [], CompletionParams(max_tokens=2048)
            )
        )
        self.seconds += time.perf_counter() - started
        self.spent += completion.usage.cost_usd
        self.calls += 1
        return completion.message.content


def _lineage(result: Any, seed: dict[str, str], config: Climb) -> list[str]:
    """Candidate ids from production to the best, following GEPA's parents."""
    chain, index = [], result.best_idx
    while index is not None:
        chain.append(candidate_id(changes(result.candidates[index], seed, config.components)))
        parents = [p for p in result.parents[index] if p is not None]
        index = parents[0] if parents else None
    return list(reversed(chain))


def _stop_reason(found: SearchResult, seconds: float) -> str:
    """Which limit ended the search."""
    budget = found.context.config.budget
    if found.nothing_to_learn:
        return "production passing every train task"
    if found.episodes >= budget.episodes:
        return f"episode budget ({budget.episodes})"
    if budget.candidates is not None and found.recorder.iterations >= budget.candidates:
        return f"proposal budget ({budget.candidates} proposals)"
    if budget.usd is not None and found.spent_usd + found.reflection_usd > budget.usd:
        return f"dollar budget (${budget.usd:g})"
    if budget.minutes is not None and seconds >= budget.minutes * 60:
        return f"time budget ({budget.minutes:g} min)"
    return "the search's metric-call budget (episodes / trials)"

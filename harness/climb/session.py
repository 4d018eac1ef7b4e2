"""What every evaluation of a climb shares, opened once for the whole climb: the results store,
the model runtime (one client per model, its response cache), the tracer, and one event loop
to which GEPA's synchronous calls (an evaluation, a reflection) submit their work.

An evaluation plays a candidate on tasks and grades it through the engine, as one stored run
keyed by its content (the variant, the tasks, the trials): the same evaluation asked again, or
resumed after the climb was killed, finds that run and plays and grades only what it lacks."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Coroutine
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from harness.engine.context import Engine
from harness.engine.executors import check_executor
from harness.engine.grade import claim_grading, grade_run
from harness.engine.play import play_run
from harness.grading.result import Verdict
from harness.pipeline.runner import RunOptions, model_runtime
from harness.sim.suite import TaskCase
from harness.specs.agent import AgentVariant, ModelRef
from harness.specs.located import SpecError
from harness.store import Store
from harness.tracing import NO_TRACER, open_run_tracer
from harness.transcript import Transcript

T = TypeVar("T")


@dataclass
class Played:
    """One evaluation: its run (None when it could not be played or graded; `failure` says
    why), every episode with its verdict by task and trial, and the seconds spent playing
    (`simulate`) and grading (`grade`)."""

    run_id: str | None
    episodes: list[tuple[Transcript, Verdict | None]] = field(default_factory=list)
    failure: str = ""
    seconds: dict[str, float] = field(default_factory=dict)


def check_options(options: RunOptions) -> None:
    """What the session needs of the options, checked before anything is written."""
    if options.executor is not None:
        check_executor(options.executor)


class ClimbSession:
    """The open resources of a climb; `close` releases them (the model clients on the loop
    that used them)."""

    def __init__(self, options: RunOptions, judge: ModelRef | None):
        self.options, self.judge = options, judge
        with ExitStack() as opening:  # what opened is closed again if the rest fails to open
            self.store = Store(options.store)
            opening.callback(self.store.close)
            self.runtime = model_runtime(options)
            opening.callback(self.runtime.close)
            traced = options.traces is not None or options.weave_project is not None
            where = options.traces or Path()
            self.tracer = open_run_tracer(options.weave_project, where) if traced else NO_TRACER
            opening.callback(self.tracer.close)
            self.loop = asyncio.Runner()
            opening.callback(self.loop.close)
            self.resources = opening.pop_all()
        self.engine = Engine(
            self.store,
            self.runtime,
            self.tracer,
            executor=options.executor,
            workers=options.workers,
            unsafe_checkers=options.unsafe_checkers,
        )

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the climb's event loop, from synchronous code."""
        return self.loop.run(work)

    def close(self) -> None:
        with self.resources:
            self.loop.run(self.runtime.aclose())

    async def evaluate(
        self,
        variant: AgentVariant,
        cases: list[TaskCase],
        config: dict[str, Any],
        trials: int,
        first_trial: int = 0,
    ) -> Played:
        """Play `trials` trials (seeds from `first_trial`) of every case with the variant and
        grade them, as a stored run whose configuration records `config` (its `suite` included:
        task id -> content hash). Bad input (a `SpecError`) stops the climb; any other failure
        is the evaluation's, which scores 0."""
        key = _digest(
            ["climb-evaluation", variant.content_hash(), config["suite"], trials, first_trial]
        )
        judge = self.judge.model_dump(mode="json") if self.judge is not None else None
        grading = f"climb-grade/{_digest([key, judge])}"
        seconds: dict[str, float] = {}
        graded: dict[tuple[str, int], tuple[Transcript, Verdict | None]] = {}

        def graded_one(transcript: Transcript, verdict: Verdict) -> None:
            graded[(transcript.task_id, transcript.trial)] = (transcript, verdict)

        try:
            started = time.perf_counter()
            played = await play_run(
                self.engine,
                cases,
                variant,
                config,
                trials=trials,
                first_trial=first_trial,
                key=key,
                fresh=self.options.fresh,
            )
            seconds["simulate"] = time.perf_counter() - started
            run_id = claim_grading(self.engine, played.run_id, self.judge, grading)
            await grade_run(
                self.engine,
                run_id,
                cases,
                self.judge,
                grading,
                attributes={"variant": played.variant, "variant_hash": played.variant_hash},
                graded_one=graded_one,
            )
            if run_id != played.run_id:
                self.store.finish_run(run_id)  # a copy, graded anew: nothing else finishes it
            seconds["grade"] = time.perf_counter() - started - seconds["simulate"]
        except SpecError:
            raise
        except Exception as exc:
            return Played(None, failure=f"{type(exc).__name__}: {exc}", seconds=seconds)
        if len(graded) < played.episodes:  # a resumed or repeated evaluation: graded before
            self.graded_before(run_id, graded)
        return Played(run_id, [graded[k] for k in sorted(graded)], seconds=seconds)

    def graded_before(
        self, run_id: str, graded: dict[tuple[str, int], tuple[Transcript, Verdict | None]]
    ) -> None:
        """Add the run's episodes this evaluation did not grade (an earlier one did) with
        their stored verdicts."""
        verdicts = {(v.task_id, v.trial): v for v in self.store.latest_verdicts(run_id)}
        for transcript, _, _ in self.store.transcripts(run_id):
            key = (transcript.task_id, transcript.trial)
            if key not in graded:
                graded[key] = (transcript, verdicts.get(key))


def _digest(parts: list[Any]) -> str:
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]

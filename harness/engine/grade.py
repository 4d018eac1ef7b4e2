"""Grade a stored run's episodes with its tasks' checks and store the verdicts.

A run is graded once: the verdicts a gate, a comparison or a report read under a run id never
change. Grading it again (another judge, changed checks) grades a copy of its episodes under a
new run id (`claim_grading`)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from harness.defaults import FOLLOW_S
from harness.engine.context import Engine
from harness.grading.checks import CheckContext
from harness.grading.normative import grade
from harness.sim.suite import TaskCase
from harness.specs.agent import ModelRef

if TYPE_CHECKING:
    from harness.grading.result import Verdict
    from harness.transcript import Transcript


def claim_grading(engine: Engine, run_id: str, judge: ModelRef | None, grading: str) -> str:
    """The run a grading pass stores its verdicts under: the given run when the pass is the
    one that grades it (the first, or the same one resumed after a crash), else a copy of its
    episodes under a new run id that records `regraded_from`. The copy is keyed by the pass
    and the run it copies, so that a resumed pass finds it again."""
    values = grading_values(judge)
    if engine.store.claim_grading(run_id, grading, values):
        return run_id
    return engine.store.copy_run(
        run_id,
        {**values, "grading": grading, "regraded_from": run_id},
        node_key=f"{grading}/{run_id}",
        pipeline_id=engine.pipeline_id,
    )


def grading_values(judge: ModelRef | None) -> dict[str, Any]:
    """What a grading pass records in its run's configuration: its judge."""
    return {"judge_model": judge.model_dump(mode="json") if judge is not None else None}


async def grade_run(
    engine: Engine,
    run_id: str,
    cases: list[TaskCase],
    judge: ModelRef | None,
    grading: str,
    *,
    concurrency: int = 8,
    label: str = "grade",
    attributes: dict[str, Any] | None = None,
    graded_one: Callable[[Transcript, Verdict], None] | None = None,
    playing: asyncio.Future[Any] | None = None,
    planned: int | None = None,
) -> Counter[str]:
    """Grade every stored episode of a run (streamed from the store) and store the verdicts;
    their count by outcome.

    The verdicts form one grading pass, named `grading` (the run's own: `claim_grading`): a
    pass resumed after a crash grades only the episodes it had not graded. `attributes` go on
    each grading span (the run's variant, for example); `graded_one` is told each episode this
    call grades with its verdict, as it is stored (the climb scores candidates from them).

    With `playing` (done when the run's episodes are all played), episodes are graded as they
    are stored, while the others play: the store is looked at again every `FOLLOW_S`, and the
    call returns once `playing` is done and every episode is graded. `planned` is then the
    number of episodes the progress line counts to."""
    store, by_id = engine.store, {case.task.id: case for case in cases}
    graded = store.graded_keys(run_id, grading)
    total = planned if planned is not None else len(store.episode_keys(run_id))
    tracker = engine.board.track(label, total)
    for _ in graded:
        tracker.advance()
    attributes = {"run_id": run_id, **(attributes or {})}

    async def worker(episodes: Iterator[tuple[Transcript, str | None, str | None]]) -> None:
        for transcript, trace_id, call_id in episodes:  # a shared iterator: each item once
            case = by_id.get(transcript.task_id)
            if case is None:
                continue  # a task no longer in the set
            parent = engine.tracer.reference(trace_id, call_id)
            span_attributes = {**attributes, "task_id": case.task.id, "trial": transcript.trial}
            with engine.tracer.span(
                "harness.grade", {"task_id": case.task.id}, span_attributes, parent=parent
            ) as span:
                context = CheckContext(
                    case.task, engine.runtime, judge, engine.unsafe_checkers, case.domain
                )
                verdict = await grade(transcript, context)
                if span is not None:
                    span.output = verdict
            store.add_verdict(run_id, verdict, grading)
            if graded_one is not None:
                graded_one(transcript, verdict)
            passed = None if verdict.outcome == "error" else verdict.outcome == "pass"
            tracker.advance(passed=passed, error=verdict.outcome == "error")

    while True:
        last = playing is None or playing.done()  # what is stored now is all there will be
        episodes = store.transcripts(run_id, ungraded_by=grading)
        # No more workers than episodes: each is a task held in memory while it waits.
        workers = max(min(concurrency, total), 1)
        await asyncio.gather(*(worker(episodes) for _ in range(workers)))
        if last:
            return Counter(store.grading_counts(run_id, grading))
        assert playing is not None
        await asyncio.wait((playing,), timeout=FOLLOW_S)

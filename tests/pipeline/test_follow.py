"""A node kind that `follows` its need starts from what the need announced, before the need
finishes, and ends after it; when the need fails, the follower is skipped. Two toy kinds play
the parts of `simulate` and `grade` in the real DAG executor, over a real results store."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from harness.engine.progress import Board
from harness.pipeline.dag import Execution, Plan, PlannedNode, execute
from harness.pipeline.nodes import NodeContext, NodeKind
from harness.pipeline.types import NodeOutput
from harness.specs.base import Spec
from harness.store import Store
from harness.tracing import Tracer


class Count(NodeOutput):
    value: int


class Steps(Spec):
    steps: int = 3
    fail: bool = False
    stop_waiting: bool = False  # the follower gives up waiting and fails


def kinds(log: list[str]) -> tuple[NodeKind, NodeKind]:
    """A producer that announces at once and finishes after `steps` ticks (or fails), and a
    follower that notes what it was given and what it finally got."""

    async def produce(params: Steps, inputs: list[Any], ctx: NodeContext) -> Count:
        ctx.announce(Count(value=0))
        for step in range(params.steps):
            log.append(f"produced {step}")
            await asyncio.sleep(0.01)
        if params.fail:
            raise RuntimeError("the producer broke")
        return Count(value=params.steps)

    async def follow(params: Steps, inputs: list[Any], ctx: NodeContext) -> Count:
        log.append(f"follower started from {inputs[0].value}")
        waiting = asyncio.ensure_future(ctx.inputs_done())
        if params.stop_waiting:
            await asyncio.sleep(0)
            waiting.cancel()
            raise RuntimeError("the follower broke")
        [final] = await waiting
        log.append(f"follower saw {final.value}")
        return Count(value=final.value + 1)

    producer = NodeKind("test_producer", Steps, (), Count, produce)
    follower = NodeKind("test_follower", Steps, ((Count,),), Count, follow, follows=True)
    return producer, follower


def run(tmp_path: Path, fail: bool, stop_waiting: bool = False) -> tuple[Execution, list[str]]:
    log: list[str] = []
    producer, follower = kinds(log)
    plan = Plan(
        "follow",
        {
            "produce": PlannedNode("produce", producer, Steps(fail=fail), []),
            "follow": PlannedNode(
                "follow", follower, Steps(stop_waiting=stop_waiting), ["produce"]
            ),
        },
    )
    store = Store(tmp_path / "results.db")
    try:
        with Board(enabled=False) as board:
            runtime: Any = None  # these nodes call no model
            base = NodeContext(store, runtime, Tracer(None), board, "dag-test", "")
            execution = asyncio.run(execute(plan, base))
    finally:
        store.close()
    return execution, log


def test_a_follower_starts_from_the_announcement_and_ends_with_the_final_output(
    tmp_path: Path,
) -> None:
    execution, log = run(tmp_path, fail=False)
    assert log == [
        "produced 0",
        "follower started from 0",
        "produced 1",
        "produced 2",
        "follower saw 3",
    ]
    assert execution.outputs["follow"] == Count(value=4)
    statuses = execution.statuses
    assert statuses["follow"].state == "ran" and statuses["produce"].state == "ran"
    assert statuses["follow"].started < statuses["produce"].finished <= statuses["follow"].finished


def test_a_follower_of_a_failed_node_is_skipped_and_the_failure_is_the_producers(
    tmp_path: Path,
) -> None:
    execution, log = run(tmp_path, fail=True)
    assert "follower started from 0" in log and not any(x.startswith("follower saw") for x in log)
    assert execution.statuses["produce"].state == "failed"
    assert "the producer broke" in execution.statuses["produce"].error
    assert execution.statuses["follow"].state == "skipped"
    assert "follow" not in execution.outputs


def test_a_follower_that_stops_waiting_does_not_stop_what_it_follows(tmp_path: Path) -> None:
    execution, log = run(tmp_path, fail=False, stop_waiting=True)
    assert log[-1] == "produced 2"
    assert execution.statuses["produce"].state == "ran"
    assert execution.outputs["produce"] == Count(value=3)
    assert execution.statuses["follow"].state == "failed"
    assert "the follower broke" in execution.statuses["follow"].error

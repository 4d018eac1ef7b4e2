"""Every episode of `harness run-eval` is a Weave trace in the local store, read back through the
real weave client with its parent/child structure and attributes."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from harness.grading.result import Verdict
from harness.production.episodes import from_trace
from harness.store import Store
from harness.tracing import Tracer, open_local_client
from tests.conftest import JUDGE, SCRIPTED, run_cli

TASKS = ["tasks/support/refund-by-email.yaml", "tasks/support/dispute-handoff.yaml"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    folder = tmp_path_factory.mktemp("traced")
    store, traces = folder / "results.db", folder / "traces.db"
    args = [a for task in TASKS for a in ("--tasks", task)]
    done = run_cli(
        "run-eval",
        *args,
        "--agent",
        "agents/support-baseline.yaml",
        "--store",
        store,
        "--traces",
        traces,
        "--trials",
        "2",
        "--set",
        SCRIPTED,
        "--judge-model",
        JUDGE,
    )
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(store) as db:
        [(run_id,)] = db.execute("SELECT id FROM runs")
    return store, traces, run_id


def plain(value):
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def test_calls_nest_evaluation_episode_turn_model_and_tool(recorded) -> None:
    _, traces, run_id = recorded
    tracer = Tracer(open_local_client(traces))
    try:
        calls = list(tracer.client.get_calls())
    finally:
        tracer.close()
    by_id = {c.id: c for c in calls}
    ops = Counter(c.op_name.split("/")[-1].split(":")[0] for c in calls)
    assert ops["harness.evaluation"] == 1 and ops["harness.episode"] == 4
    assert ops["harness.grade"] == 4
    [root] = [c for c in calls if c.parent_id is None]
    assert "harness.evaluation" in root.op_name
    assert {c.trace_id for c in calls} == {root.trace_id}, "one trace per run"
    assert plain(root.output) == {"episodes": 4, "errors": 0}

    def op(call) -> str:
        return call.op_name.split("/")[-1].split(":")[0]

    parents = {op(c): Counter() for c in calls}
    for call in calls:
        if call.parent_id:
            parents[op(call)][op(by_id[call.parent_id])] += 1
    assert set(parents["harness.episode"]) == {"harness.evaluation"}
    assert set(parents["harness.grade"]) == {"harness.episode"}
    assert set(parents["harness.turn"]) == {"harness.episode"}
    assert parents["harness.model_call"] == Counter({"harness.turn": 16, "harness.grade": 2})
    assert set(parents["harness.tool_call"]) == {"harness.turn"}
    # refund-by-email: 3 turns, 7 model calls, 4 tool calls; dispute-handoff: 1, 1, 1 and one
    # judge call for its llm_judge check; x2 trials
    assert ops["harness.turn"] == 8 and ops["harness.model_call"] == 18
    assert ops["harness.tool_call"] == 10

    for call in calls:
        attributes = plain(dict(call.attributes))
        assert attributes["run_id"] == run_id
        assert attributes["variant"] == "support-baseline"
        assert len(attributes["variant_hash"]) == 16
        if op(call) != "harness.evaluation":
            assert attributes["task_id"] in {"refund-by-email", "dispute-handoff"}
            assert attributes["trial"] in {0, 1}


def test_episode_outputs_are_the_stored_transcripts_and_verdicts(recorded) -> None:
    store, traces, run_id = recorded
    results = Store(store)
    stored = {(t.task_id, t.trial): t for t, _, _ in results.transcripts(run_id)}
    verdicts = {(v.task_id, v.trial): v for v in results.latest_verdicts(run_id)}
    tracer = Tracer(open_local_client(traces))
    try:
        episodes = list(tracer.client.get_calls(filter={"op_names": ["harness.episode"]}))
        grades = list(tracer.client.get_calls(filter={"op_names": ["harness.grade"]}))
        tool_calls = list(tracer.client.get_calls(filter={"op_names": ["harness.tool_call"]}))
    finally:
        tracer.close()
    assert len(episodes) == 4
    for episode in episodes:
        # a trace keeps what the episode changed: the final state is rebuilt from the store's
        # start state, and is the final state the store rebuilds
        transcript = from_trace(episode.output, results.state)
        assert transcript == stored[(transcript.task_id, transcript.trial)]
        assert transcript.final_state and "final_state" not in episode.output
    results.close()
    for grade in grades:
        verdict = Verdict.model_validate(plain(grade.output))
        assert verdict == verdicts[(verdict.task_id, verdict.trial)]
    refunds = [c for c in tool_calls if plain(c.inputs)["name"] == "issue_refund"]
    assert plain(refunds[0].inputs)["arguments"] == {
        "order_id": "O-1006",
        "reason": "customer request",
    }
    assert plain(refunds[0].output)["is_error"] is False


def test_traces_list_and_show(recorded) -> None:
    _, traces, run_id = recorded
    listed = run_cli("traces", "list", "--trace-store", traces, COLUMNS="200")
    assert listed.returncode == 0, listed.stderr
    rows = [line for line in listed.stdout.splitlines() if run_id in line]
    assert len(rows) == 4
    assert sum("dispute-handoff" in r and "agent_handoff" in r and "pass" in r for r in rows) == 2
    call_id = next(r for r in rows if "refund-by-email" in r).split("│")[1].strip()
    shown = run_cli("traces", "show", call_id, "--trace-store", traces, COLUMNS="200")
    assert shown.returncode == 0, shown.stderr
    assert "user: Um, I think it's alan@example.com?" in shown.stdout
    assert '-> issue_refund({"order_id": "O-1006", "reason": "customer request"})' in shown.stdout
    assert "verdict: pass" in shown.stdout
    missing = run_cli("traces", "show", "nope", "--trace-store", traces)
    assert missing.returncode == 2 and "no single finished episode" in missing.stderr


def test_an_errored_episode_is_an_errored_call(tmp_path: Path) -> None:
    traces = tmp_path / "traces.db"
    done = run_cli(
        "run-eval",
        "--tasks",
        "tasks/support/order-status.yaml",
        "--agent",
        "agents/support-baseline.yaml",
        "--store",
        tmp_path / "r.db",
        "--traces",
        traces,
        "--set",
        "agent.model={id: scripted, script: tests/data/silent-agent.yaml}",
    )
    # every episode errored: the agent's model failed (missing evidence, not the agent's fail)
    assert done.returncode == 3, done.stderr
    assert "every episode errored (agent_model 1)" in done.stderr + done.stdout
    tracer = Tracer(open_local_client(traces))
    try:
        [episode] = tracer.client.get_calls(filter={"op_names": ["harness.episode"]})
    finally:
        tracer.close()
    assert episode.exception
    assert "agent_model: the agent's model provider failed: agent model" in episode.exception
    assert from_trace(episode.output).error.side.value == "agent_model"


def test_no_traces_records_nothing(tmp_path: Path) -> None:
    traces = tmp_path / "traces.db"
    done = run_cli(
        "run-eval",
        "--tasks",
        TASKS[1],
        "--agent",
        "agents/support-baseline.yaml",
        "--store",
        tmp_path / "r.db",
        "--traces",
        traces,
        "--no-traces",
        "--set",
        SCRIPTED,
        "--judge-model",
        JUDGE,
    )
    assert done.returncode == 0 and not traces.exists()

"""Tracing: spans through the facade into the local SQLite store, read back by weave's client."""

from __future__ import annotations

import asyncio
import datetime
import inspect
import json
import logging
import sqlite3
import subprocess
import sys
import textwrap
import threading
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.tracing import NO_TRACER, Tracer, open_local_client, open_run_tracer, open_tracer
from harness.transcript import EndReason, Message, ToolCall, Transcript, Usage
from tests.conftest import ROOT

ATTRIBUTES = {
    "task_id": "refund-1",
    "variant": "base",
    "variant_hash": "ab12",
    "trial": 2,
    "run_id": "r7",
}


@pytest.fixture(params=["weave", "direct"])
def tracer(
    request: pytest.FixtureRequest, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> Iterator[Tracer]:
    """A tracer on a fresh store, through weave's client or the direct writer a run uses (the
    same tests hold for both); fails the test if weave logged an error (its background writes
    report failures only through its log)."""
    opened = open_tracer if request.param == "weave" else open_run_tracer
    tracer = opened(None, tmp_path / "traces.db")
    with caplog.at_level(logging.WARNING, logger="weave"):
        yield tracer
    tracer.close()
    assert not [r for r in caplog.records if r.name.startswith("weave")], caplog.text


def _transcript() -> Transcript:
    return Transcript(
        task_id="refund-1",
        variant="base",
        variant_hash="ab12",
        trial=2,
        messages=[
            Message(role="user", content="refund order 7"),
            Message(
                role="assistant",
                tool_calls=[ToolCall(id="c1", name="refund", arguments={"order": 7})],
            ),
        ],
        usage=Usage(calls=1, input_tokens=12),
        end_reason=EndReason.USER_STOP,
    )


def test_nested_spans_read_back_through_the_weave_client(tracer: Tracer) -> None:
    episode = tracer.start("episode", {"task": "refund-1"}, ATTRIBUTES, display_name="refund-1 #2")
    turn = tracer.start("turn", {"index": 0}, ATTRIBUTES, parent=episode)
    asked = Message(role="user", content="refund order 7")
    with tracer.span("model_call", {"messages": [asked]}, parent=turn) as model:
        assert model is not None
        model.output = {"text": "done", "input_tokens": 12}
    with pytest.raises(LookupError), tracer.span("tool_call", {"name": "refund"}, parent=turn):
        raise LookupError("no order 7")
    tracer.end(turn, {"replied": True})
    tracer.end(episode, _transcript())
    tracer.flush()
    assert tracer.client is not None

    calls = {call.func_name: call for call in tracer.client.get_calls()}
    assert list(calls) == ["episode", "turn", "model_call", "tool_call"]  # by started_at
    ep, tu, mc, tc = calls.values()
    assert {c.trace_id for c in calls.values()} == {ep.trace_id}  # a root's trace_id is not its id
    assert (ep.parent_id, tu.parent_id, mc.parent_id, tc.parent_id) == (None, ep.id, tu.id, tu.id)
    assert ep.display_name == "refund-1 #2"
    assert {k: ep.attributes[k] for k in ATTRIBUTES} == ATTRIBUTES
    assert ep.inputs == {"task": "refund-1"} and mc.output == {"text": "done", "input_tokens": 12}
    assert mc.inputs == {"messages": [asked.model_dump(mode="json", exclude_defaults=True)]}

    # A pydantic output reads back as a dict of its fields, which validates as the model again.
    assert ep.output["task_id"] == "refund-1" and ep.output["end_reason"] == "user_stop"
    assert ep.output["messages"][1]["tool_calls"][0]["arguments"] == {"order": 7}
    assert Transcript.model_validate(ep.output) == _transcript()
    raw = tracer.client.server.call_read({"project_id": ep.project_id, "id": ep.id}).call
    assert raw is not None and raw.output == _transcript().model_dump(
        mode="json", exclude_defaults=True
    )

    assert tc.output is None and json.loads(tc.exception)["type"] == "LookupError"
    statuses = [c.summary["weave"]["status"] for c in (ep, tu, mc, tc)]
    assert statuses == ["descendant_error", "descendant_error", "success", "error"]
    assert tc.summary["status_counts"] == {"success": 0, "error": 1}

    client = tracer.client
    assert [c.id for c in client.get_calls(filter={"trace_roots_only": True})] == [ep.id]
    assert [c.id for c in client.get_calls(filter={"parent_ids": [tu.id]})] == [mc.id, tc.id]
    assert [c.id for c in client.get_calls(filter={"op_names": [mc.op_name, "tool_call"]})] == [
        mc.id,
        tc.id,
    ]
    by_status = client.get_calls(
        query={"$expr": {"$eq": [{"$getField": "summary.weave.status"}, {"$literal": "error"}]}}
    )
    assert [c.id for c in by_status] == [tc.id] and len(by_status) == 1
    assert len(client.get_calls()) == 4 and len(client.get_calls(limit=3)) == 3
    latest = client.get_calls(sort_by=[{"field": "started_at", "direction": "desc"}], limit=2)
    assert [c.id for c in latest] == [tc.id, mc.id]
    assert [c.id for c in client.get_calls(offset=3)] == [tc.id]
    assert client.get_call(tu.id).inputs == {"index": 0}


def test_concurrent_episodes_keep_their_own_parents(tracer: Tracer) -> None:
    async def episode(trial: int) -> None:
        root = tracer.start("episode", {}, {**ATTRIBUTES, "trial": trial})
        for index in range(3):
            with tracer.span("turn", {"index": index}, parent=root):
                await asyncio.sleep(0)
        tracer.end(root, {"trial": trial})

    async def main() -> None:
        await asyncio.gather(*(episode(trial) for trial in range(4)))

    asyncio.run(main())
    tracer.flush()
    assert tracer.client is not None
    calls = list(tracer.client.get_calls())
    roots = {c.id: c for c in calls if c.parent_id is None}
    assert sorted(c.attributes["trial"] for c in roots.values()) == [0, 1, 2, 3]
    turns = [c for c in calls if c.parent_id is not None]
    assert len(turns) == 12
    for turn in turns:
        assert turn.trace_id == roots[turn.parent_id].trace_id


def test_store_persists_for_a_new_process_without_network(tmp_path: Path) -> None:
    store = tmp_path / "traces.db"
    writer = textwrap.dedent(
        f"""
        import sys

        def no_network(event, args):
            if event in ("socket.connect", "socket.getaddrinfo", "socket.sendto"):
                raise RuntimeError(f"network access: {{event}} {{args}}")

        sys.addaudithook(no_network)
        from pathlib import Path
        from harness.tracing import open_tracer

        tracer = open_tracer(None, Path({str(store)!r}))
        with tracer.span("episode", {{"task": "t"}}) as root:
            tracer.end(tracer.start("turn", {{"index": 0}}, parent=root), "hi")
        tracer.close()
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", writer], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "Task failed" not in result.stderr, result.stderr

    client = open_local_client(store)
    try:
        calls = list(client.get_calls())
        assert [c.func_name for c in calls] == ["episode", "turn"]
        assert calls[1].parent_id == calls[0].id and calls[1].output == "hi"
    finally:
        Tracer(client).close()


def test_the_direct_writer_writes_the_rows_weave_writes(tmp_path: Path) -> None:
    """Same spans through both tracers: the same rows, but for ids, times and writers."""

    def record(tracer: Tracer) -> None:
        with tracer.span("harness.episode", {"task": "t"}, ATTRIBUTES) as root:
            with tracer.span("harness.turn", {"index": 0}, parent=root) as turn:
                assert turn is not None
                turn.output = {"assistant": ["hi"]}
            with pytest.raises(KeyError), tracer.span("harness.tool_call", {}, parent=root):
                raise KeyError("no order sk-abcdefghijklmnopqrstuvwxyz123456")
            assert root is not None
            root.output = _transcript()
        tracer.close()

    rows = {}
    for name, opened in (("weave", open_tracer), ("direct", open_run_tracer)):
        record(opened(None, tmp_path / f"{name}.db"))
        db = sqlite3.connect(tmp_path / f"{name}.db")
        db.row_factory = sqlite3.Row
        rows[name] = [
            {**dict(row), "exception": _exception_words(row["exception"])}
            for row in db.execute("SELECT * FROM calls ORDER BY started_at")
        ]
        ops = db.execute("SELECT object_id, digest, kind, val FROM objects ORDER BY object_id")
        rows[name + " ops"] = [tuple(op) for op in ops]
    varying = {"id", "trace_id", "parent_id", "started_at", "ended_at", "writer"}
    assert [{k: v for k, v in r.items() if k not in varying} for r in rows["direct"]] == [
        {k: v for k, v in r.items() if k not in varying} for r in rows["weave"]
    ]
    assert rows["direct ops"] == rows["weave ops"]
    for name in ("weave", "direct"):  # a key in an exception's message is masked by both
        assert "sk-abcdefghijklmnopqrstuvwxyz123456" not in json.dumps(rows[name])


def _exception_words(text: str | None) -> tuple[str, str] | None:
    """An exception's type and message (the stacks differ: they are the writers' own)."""
    if text is None:
        return None
    data = json.loads(text)
    return data["type"], data["message"]


def test_a_run_records_without_importing_weave(tmp_path: Path) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from harness.tracing import open_run_tracer

        tracer = open_run_tracer(None, Path({str(tmp_path / "traces.db")!r}))
        with tracer.span("harness.episode", {{"task": "t"}}) as root:
            tracer.end(tracer.start("harness.turn", {{"index": 0}}, parent=root), "hi")
        tracer.close()
        print(sorted(m for m in sys.modules if m.split(".")[0] == "weave"))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    client = open_local_client(tmp_path / "traces.db")
    try:
        episode, turn = client.get_calls()
        assert (turn.parent_id, turn.output) == (episode.id, "hi")
        assert episode.summary["status_counts"] == {"success": 2, "error": 0}
    finally:
        Tracer(client).close()


def test_spans_ended_after_their_rows_are_written_read_back_whole(tmp_path: Path) -> None:
    """Rows go many to a statement, and the end of a span whose row is written already is
    applied to that row: 300 spans open across a write, ended after it, read back once each."""
    tracer = open_run_tracer(None, tmp_path / "traces.db")
    with tracer.span("harness.evaluation", {"suite": "s"}, ATTRIBUTES) as root:
        spans = [tracer.start("harness.turn", {"index": i}, parent=root) for i in range(300)]
        tracer.flush()  # written while open
        for index, span in enumerate(spans[:200]):
            tracer.end(span, {"said": f"turn {index}"})
        tracer.flush()
        for index, span in enumerate(spans[200:], start=200):
            tracer.end(span, exception=ValueError(f"turn {index} failed"))
    tracer.close()
    client = open_local_client(tmp_path / "traces.db")
    try:
        calls = {c.inputs.get("index", "root"): c for c in client.get_calls()}
    finally:
        Tracer(client).close()
    assert len(calls) == 301
    assert calls[7].output == {"said": "turn 7"} and calls[7].ended_at is not None
    assert calls[7].parent_id == calls["root"].id
    assert calls[250].exception is not None and "turn 250 failed" in calls[250].exception
    assert calls["root"].summary["status_counts"] == {"success": 201, "error": 100}


def test_an_unwritable_trace_store_ends_the_run_with_one_error_not_a_hang(
    tmp_path: Path, monkeypatch
) -> None:
    """The writer meets a store it cannot write: spans stop being recorded (none wait for the
    writer), and closing the tracer says which store and why."""
    from harness.tracing import local_writer

    monkeypatch.setattr(local_writer, "MAX_PENDING", 20)  # spans would wait for the writer
    store = tmp_path / "traces.db"
    tracer = open_run_tracer(None, store)
    tracer.end(tracer.start("harness.turn", {"index": 0}), "first")
    tracer.flush()
    sqlite3.connect(store).execute("DROP TABLE calls")  # what a broken store looks like

    def spans() -> None:  # more than MAX_PENDING, long after the writer failed
        for index in range(200):
            tracer.end(tracer.start("harness.turn", {"index": index}), "more")

    recording = threading.Thread(target=spans, daemon=True)
    recording.start()
    recording.join(timeout=30)
    assert not recording.is_alive(), "a span waited for a writer that had stopped"
    with pytest.raises(RuntimeError, match=r"traces could not be written to .*traces\.db: .*calls"):
        tracer.close()


def test_call_end_before_call_start_is_stored(tmp_path: Path) -> None:
    from weave.vendor.weave_server_sdk.types import CallEndParams, CallStartParams

    from harness.tracing.local_server import LocalTraceServer

    server = LocalTraceServer(tmp_path / "traces.db")
    project, op = "local/harness", "weave:///local/harness/op/episode:abc"
    started = datetime.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=datetime.UTC)
    ended = started + datetime.timedelta(milliseconds=250)
    end: CallEndParams = {
        "end": {
            "project_id": project,
            "id": "c1",
            "trace_id": "c1",
            "started_at": started,
            "ended_at": ended,
            "output": {"answer": 42},
            "summary": {"status_counts": {"success": 1, "error": 0}},
        }
    }
    start: CallStartParams = {
        "start": {
            "project_id": project,
            "id": "c1",
            "trace_id": "c1",
            "op_name": op,
            "started_at": started.isoformat(),
            "attributes": {"task_id": "t"},
            "inputs": {"question": "?"},
        }
    }
    server.call_end(end)
    assert server.call_read({"project_id": project, "id": "c1"}).call is None  # not started yet
    assert server.call_start(start).id == "c1"

    call = server.call_read({"project_id": project, "id": "c1"}).call
    assert call is not None
    assert (call.op_name, call.inputs, call.output) == (op, {"question": "?"}, {"answer": 42})
    assert (call.started_at, call.ended_at) == (started, ended)
    assert call.summary is not None and call.summary["weave"]["status"] == "success"
    assert call.summary["weave"]["latency_ms"] == 250
    assert server.calls_query_stats({"project_id": project}).count == 1
    server.close()


def test_feedback_on_a_call(tracer: Tracer) -> None:
    with tracer.span("episode", {}):
        pass
    tracer.flush()
    assert tracer.client is not None
    call = tracer.client.get_calls()[0]
    reaction = call.feedback.add_reaction("👎")
    call.feedback.add_note("refunded the wrong order")

    [read] = tracer.client.get_calls(include_feedback=True)
    feedback = read.summary["weave"]["feedback"]
    assert [f["payload"] for f in feedback] == [
        {"emoji": "👎"},
        {"note": "refunded the wrong order"},
    ]
    assert [f.id for f in tracer.client.get_feedback(reaction="👎")] == [reaction]
    assert [f.feedback_type for f in call.feedback] == ["wandb.reaction.1", "wandb.note.1"]
    assert {f.weave_ref for f in tracer.client.get_feedback()} == {call.ref.uri}


# weave 0.54 reads attributes that pydantic 2.11 deprecated when it serializes a `weave.Object`.
@pytest.mark.filterwarnings(r"ignore::DeprecationWarning:weave\.")
def test_objects_tables_and_refs_in_span_inputs(tracer: Tracer) -> None:
    import weave

    from harness.tracing.local_writer import LocalTracer

    if isinstance(tracer, LocalTracer):
        pytest.skip("weave objects in inputs are for weave's client; a run records plain data")

    rows = [{"id": "a", "turns": 1}, {"id": "b", "turns": 2}]
    weave.publish(weave.Dataset(name="tasks", rows=rows))  # obj_create, table_create
    dataset = weave.ref("tasks:latest").get()
    with tracer.span("suite", {"dataset": dataset, "row": dataset.rows[1]}):
        pass
    tracer.flush()
    assert tracer.client is not None
    [call] = tracer.client.get_calls()
    assert [dict(row) for row in call.inputs["dataset"].rows] == rows  # obj_read, table_query
    assert dict(call.inputs["row"]) == rows[1]

    raw = tracer.client.server.call_read({"project_id": call.project_id, "id": call.id}).call
    assert raw is not None and "/attr/rows/id/" in raw.inputs["row"]
    assert dict(weave.ref(raw.inputs["row"]).get()) == rows[1]  # refs_read_batch
    assert weave.ref(f"weave:///{call.project_id}/object/tasks:v0").get().name == "tasks"
    op = weave.ref(call.op_name).get()  # the op's code, through file_content_read
    assert callable(op)


def test_local_store_matches_the_pinned_weave_interface() -> None:
    """Fails when weave moves: the local store implements part of a protocol that changes."""
    import weave
    from weave.trace_server_bindings.client_interface import TraceServerClientInterface

    from harness.tracing.local_server import LocalTraceServer

    assert weave.__version__ == "0.54.0", "re-check harness.trace_store against the new weave"
    methods = {
        name
        for name, _ in inspect.getmembers(LocalTraceServer, inspect.isfunction)
        if not name.startswith("_") and name != "close"
    }
    assert methods == {
        *("call_start", "call_end", "call_read", "calls_query_stream", "calls_query_stats"),
        *("obj_create", "obj_read", "file_create", "file_content_read"),
        *("table_create", "table_query", "refs_read_batch", "feedback_create", "feedback_query"),
    }
    for name in methods:
        assert hasattr(TraceServerClientInterface, name), f"{name} left the interface"
        ours = typing.get_type_hints(getattr(LocalTraceServer, name))
        theirs = typing.get_type_hints(getattr(TraceServerClientInterface, name))
        assert ours["req"] == theirs["req"], f"{name}: request type changed"
        if theirs["return"] is not object:
            assert ours["return"] == theirs["return"], f"{name}: response type changed"


def test_disabled_tracer_costs_nothing_and_import_does_not_load_weave() -> None:
    check = textwrap.dedent(
        """
        import sys
        import harness.tracing as tracing

        tracer = tracing.NO_TRACER
        with tracer.span("episode", {"task": "t"}) as span:
            tracer.end(tracer.start("turn", {}, parent=span), "out")
        tracer.flush()
        tracer.close()
        assert span is None and tracer.client is None and not tracer.enabled
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("weave", "wandb"))
        assert not loaded, loaded
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert NO_TRACER.start("x", {}) is None and not NO_TRACER.enabled


def test_online_tracer_refuses_to_prompt_without_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    with pytest.raises(RuntimeError, match="WANDB_API_KEY"):
        open_tracer("someone/somewhere")

"""weave's objects read as data, from every source, for the real clients of both SDKs.

Issue 38: an Anthropic app recorded with weave 0.54 came back with each `Messages.create` reply
as the text `"ObjectRecord({...})"`, and `traces to-tasks` said `0 unreadable`. Here the claims
assistant (`tests/apps/claims_app.py`: the real `anthropic` client, streamed and not, SDK objects sent
back in its history, a coverage sub-step through `messages.stream`) and two OpenAI apps
(`tests/apps/helpdesk_app.py` streams, `tests/apps/support_app.py` does not) are recorded by the real weave
against the fake server, then read back through the CLI: the export, the local store and a raw
export of the trace server all keep every reply, and a recording whose replies weave did not
keep is counted unreadable, never converted as if the agent had said nothing.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
import subprocess
import sys
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from harness.production import llm_calls
from harness.production.calls import CallRecord, Filters, read_client, read_jsonl
from harness.production.reconstruct import Conversation, conversations
from harness.testing.fake_server import FakeServer
from harness.tracing import Tracer, open_local_client
from harness.tracing.plain import plain
from tests.apps import claims_app, helpdesk_app, support_app
from tests.conftest import run_cli

UNREADABLE_SESSIONS = 6  # the first sessions of the app, recorded streaming through text_stream


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Four recordings made at once, each by its app in its own process with the real weave
    and its SDK's real client, each against its own fake server (to count the requests):
    the claims app (`claims`), its first sessions with the web channel streamed through
    `text_stream` (`lost`), the helpdesk (`helpdesk`) and the support bot (`support`);
    each exported with `harness traces export`."""
    folder = tmp_path_factory.mktemp("weave-objects")
    apps = {
        "claims": (claims_app, ["events"]),
        "lost": (claims_app, ["text", str(UNREADABLE_SESSIONS)]),
        "helpdesk": (helpdesk_app, []),
        "support": (support_app, []),
    }
    out: dict[str, Any] = {"folder": folder}
    with ExitStack() as stack:
        running = {}
        for name, (app, extra) in apps.items():
            server = stack.enter_context(FakeServer(responder=app.production_model).running())
            store = folder / f"{name}.db"
            command = [sys.executable, app.__file__, str(store), server.url, *extra]
            running[name] = (server, store, subprocess.Popen(command, stderr=subprocess.PIPE))
        for name, (server, store, process) in running.items():
            _, stderr = process.communicate(timeout=120)
            assert process.returncode == 0, stderr.decode()[-3000:]
            out[name] = {"store": store, "requests": server.stats["requests"]}
    for name in apps:
        export = folder / f"{name}.jsonl"
        done = run_cli("traces", "export", "--trace-store", out[name]["store"], "--out", export)
        assert done.returncode == 0, done.stderr
        out[name]["export"] = export
    return out


def rows(export: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in export.read_text().splitlines()]


def op(row: dict[str, Any]) -> str:
    return row["op_name"].split("/op/")[-1].split(":")[0]


def local_records(store: Path) -> list[CallRecord]:
    tracer = Tracer(open_local_client(store))
    try:
        return list(read_client(tracer.client, Filters()))
    finally:
        tracer.close()


def converted(records: Any) -> tuple[dict[str, Conversation], list[str]]:
    problems: list[Any] = []
    found = {c.key.removeprefix("thread "): c for c in conversations(records, problems)}
    return found, [str(p) for p in problems]


def said(conversation: Conversation) -> list[dict[str, Any]]:
    return [m.model_dump(mode="json") for m in conversation.transcript.messages]


def tool_calls(conversation: Conversation) -> Counter[str]:
    return Counter(
        json.dumps([c.name, c.arguments], sort_keys=True)
        for m in conversation.transcript.messages
        for c in m.tool_calls
    )


def tool_ops(conversation: Conversation) -> Counter[str]:
    """The tools the app ran, from the tool ops (recorded apart from the model's replies)."""
    return Counter(
        json.dumps([o.name, o.arguments], sort_keys=True) for o in conversation.observations
    )


def test_every_anthropic_reply_is_exported_as_data(recorded) -> None:
    claims = recorded["claims"]
    text = claims["export"].read_text()
    assert "ObjectRecord(" not in text and "WeaveObject(" not in text
    assert "Omit object at" not in text and "NOT_GIVEN" not in text  # arguments not given
    llm = [r for r in rows(claims["export"]) if op(r).startswith("anthropic.Messages.")]
    assert len(llm) == claims["requests"]  # every model call the server answered
    created = [r for r in llm if op(r) == "anthropic.Messages.create"]
    streamed = [r for r in created if r["inputs"].get("stream") is True]
    unstreamed = [r for r in created if "stream" not in r["inputs"]]
    assert streamed and unstreamed and len(streamed) + len(unstreamed) == len(created)
    for row in created:
        output = row["output"]
        assert isinstance(output, dict) and output["role"] == "assistant", output
        assert all(isinstance(b, dict) and "type" in b for b in output["content"])
    for row in unstreamed:  # the whole reply: the text, or the tool calls with their input
        blocks, stop = row["output"]["content"], row["output"]["stop_reason"]
        uses = [b for b in blocks if b["type"] == "tool_use"]
        assert uses if stop == "tool_use" else blocks[0]["text"], row["output"]
        assert all(isinstance(b["input"], dict) and b["name"] for b in uses)
    # weave 0.54 keeps a streamed reply's text only: the tool calls come from the next history
    assert any(
        r["output"]["stop_reason"] == "tool_use"
        and not any(b["type"] == "tool_use" for b in r["output"]["content"])
        for r in streamed
    )
    coverage = [r for r in llm if op(r) == "anthropic.Messages.stream"]  # the sub-step
    assert coverage and all(r["output"]["content"][0]["text"] for r in coverage)
    # the SDK's blocks the app sent back in its history are data too
    sent_back = [
        block
        for r in unstreamed
        for m in r["inputs"]["messages"]
        if m["role"] == "assistant" and isinstance(m["content"], list)
        for block in m["content"]
    ]
    assert any(b["type"] == "tool_use" and isinstance(b["input"], dict) for b in sent_back)


def test_the_export_and_the_local_store_keep_every_reply(recorded) -> None:
    claims = recorded["claims"]
    exported, problems = converted(read_jsonl(claims["export"], Filters(), []))
    assert problems == []
    local, problems = converted(local_records(claims["store"]))
    assert problems == []
    assert set(exported) == set(local) == set(claims_app.SESSIONS)
    channels = {s: claims_app.channel_of(i) for i, s in enumerate(claims_app.SESSIONS)}
    for thread, conversation in exported.items():
        assert said(conversation) == said(local[thread])
        assert conversation.user_texts() == claims_app.SESSIONS[thread]
        replies = [
            m for m in conversation.transcript.messages if m.role == "assistant" and m.content
        ]
        assert len(replies) == len(claims_app.SESSIONS[thread]), (thread, channels[thread])
        # the tool calls the replies asked for are the tools the app ran, streamed or not
        assert tool_calls(conversation) == tool_ops(conversation), thread
    kitchen = exported["water-kitchen"].transcript.messages
    [filed] = [c for m in kitchen for c in m.tool_calls]
    assert filed.name == "file_claim" and filed.arguments["coverage"] == "flood"  # bug 1
    assert kitchen[-1].content.startswith("I filed claim CLM-5001 under flood coverage")
    assert channels["upload-three"] == "web"  # streamed: its tool calls came from the history
    [asked] = [m for m in exported["upload-three"].transcript.messages if m.tool_calls]
    assert [c.arguments["filename"] for c in asked.tool_calls] == [
        "front.jpg",
        "back.jpg",
        "side.heic",
    ]


def test_a_raw_export_of_the_trace_server_reads_as_data(recorded, tmp_path: Path) -> None:
    """The rows as the trace server stores them (what the W&B API's `calls/stream_query`
    exports): objects in weave's encoding, with `_type`, `_class_name` and `_bases`."""
    raw = tmp_path / "raw.jsonl"
    tracer = Tracer(open_local_client(recorded["claims"]["store"]))
    try:
        client = tracer.client
        query = {"project_id": client.project_id}
        with raw.open("w") as out:
            for call in client.server.calls_query_stream(query):  # type: ignore[attr-defined]
                out.write(call.model_dump_json() + "\n")
    finally:
        tracer.close()
    assert '"_class_name": "Message"' in raw.read_text().replace('":"', '": "')
    found, problems = converted(read_jsonl(raw, Filters(), []))
    exported, _ = converted(read_jsonl(recorded["claims"]["export"], Filters(), []))
    assert problems == [] and set(found) == set(exported)
    for thread, conversation in found.items():
        assert said(conversation) == said(exported[thread])


def test_traces_show_and_to_tasks_read_every_reply(recorded, tmp_path: Path) -> None:
    store = recorded["claims"]["store"]
    shown = run_cli("traces", "show", "water-kitchen", "--trace-store", store, COLUMNS="300")
    assert shown.returncode == 0, shown.stderr
    assert "assistant: I filed claim CLM-5001 under flood coverage" in shown.stdout
    assert "note: A burst pipe is water damage, not flood." in shown.stdout
    streamed = run_cli("traces", "show", "upload-three", "--trace-store", store, COLUMNS="300")
    assert streamed.returncode == 0, streamed.stderr
    assert streamed.stdout.count("-> upload_document(") == 3
    assert "assistant: Done! I uploaded front.jpg, back.jpg and side.heic" in streamed.stdout
    made = run_cli("traces", "to-tasks", "--trace-store", store, "--out", tmp_path / "tasks")
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip().endswith(" 0 unreadable"), made.stdout + made.stderr


def test_replies_weave_did_not_keep_make_their_sessions_unreadable(recorded, tmp_path) -> None:
    """Streamed through `messages.stream(...).text_stream`, a reply is recorded by weave 0.54
    as `""`. A reply the next turn's history repeats is read from there; a session's last one
    is read nowhere, so the session is unreadable: reported and counted, never converted."""
    lost = recorded["lost"]
    streams = [r for r in rows(lost["export"]) if op(r) == "anthropic.Messages.stream"]
    assert any(r["output"] == "" for r in streams)
    sessions = list(claims_app.SESSIONS)[:UNREADABLE_SESSIONS]
    web = {s for i, s in enumerate(sessions) if claims_app.channel_of(i) == "web"}
    for source in (["--trace-store", lost["store"]], ["--source", lost["export"]]):
        done = run_cli("traces", "to-tasks", *source, "--out", tmp_path / "tasks", "--force")
        assert done.returncode == 0, done.stderr
        unreadable = re.findall(r"^unreadable thread (\S+): (.*)$", done.stderr, re.MULTILINE)
        assert {thread for thread, _ in unreadable} == web, done.stderr
        assert all("cannot be read" in why and "not converted" in why for _, why in unreadable)
        assert done.stdout.strip().endswith(f" {len(web)} unreadable"), done.stdout
    found, problems = converted(local_records(lost["store"]))
    assert set(found) == set(sessions) - web and len(problems) == len(web)
    for thread in found:  # the mobile channel's sessions convert, every reply kept
        replies = [m for m in found[thread].transcript.messages if m.role == "assistant"]
        assert sum(bool(m.content) for m in replies) == len(claims_app.SESSIONS[thread])
    [first_web] = sorted(web)[:1]
    shown = run_cli("traces", "show", first_web, "--trace-store", lost["store"])
    assert shown.returncode == 2 and "model reply of the agent cannot be read" in shown.stderr


def test_an_export_of_replies_as_object_text_is_unreadable_not_silent(recorded, tmp_path) -> None:
    """What the issue saw: each `Messages.create` output written as `"ObjectRecord({...})"`.
    Read back, no session converts as if the agent had said nothing."""
    legacy = tmp_path / "legacy.jsonl"
    with legacy.open("w") as out:
        for row in rows(recorded["claims"]["export"]):
            if op(row) == "anthropic.Messages.create":
                row["output"] = f"ObjectRecord({row['output']!r})"
            out.write(json.dumps(row) + "\n")
    done = run_cli("traces", "to-tasks", "--source", legacy, "--out", tmp_path / "tasks")
    assert done.returncode == 0, done.stderr
    count = len(claims_app.SESSIONS)
    assert done.stdout.strip().endswith(f"0 made, 0 skipped, {count} unreadable"), done.stdout
    assert done.stderr.count("the text of an object, not its data") == count


@pytest.mark.parametrize("app", ["helpdesk", "support"])
def test_openai_recordings_read_back_the_same_way(recorded, app: str) -> None:
    """The OpenAI client, streamed (the helpdesk's main agent) and not (its triage sub-agent,
    the support bot), reads back as the Anthropic one does: every reply a dict, the same
    conversations from the export and the local store."""
    made = recorded[app]
    text = made["export"].read_text()
    assert "ObjectRecord(" not in text and "NOT_GIVEN" not in text
    llm = [r for r in rows(made["export"]) if op(r) == "openai.chat.completions.create"]
    assert len(llm) == made["requests"]
    for row in llm:
        record = CallRecord.model_validate(row)
        [message] = llm_calls.reply(record)
        assert message.content or message.tool_calls, row["output"]
    if app == "helpdesk":
        assert {bool(r["inputs"].get("stream")) for r in llm} == {True, False}
    exported, problems = converted(read_jsonl(made["export"], Filters(), []))
    local, local_problems = converted(local_records(made["store"]))
    assert problems == local_problems == [] and set(exported) == set(local)
    for thread, conversation in exported.items():
        assert said(conversation) == said(local[thread])
        assert tool_calls(conversation) == tool_ops(conversation), thread


# ---------------------------------------------------------------- the conversion itself


@dataclasses.dataclass
class Point:
    x: int
    when: datetime.datetime


# weave 0.54 reads attributes that pydantic 2.11 deprecated when it records a pydantic model.
@pytest.mark.filterwarnings(r"ignore::DeprecationWarning:weave\.")
def test_plain_reads_each_kind_of_weave_object() -> None:
    """`plain` on the objects weave 0.54 hands back, built with weave's own constructors."""
    import anthropic.types as a
    import weave  # noqa: F401  (loads weave's classes)
    from weave.trace.box import box
    from weave.trace.object_record import pydantic_object_record
    from weave.trace.refs import ObjectRef
    from weave.trace.vals import WeaveDict, WeaveList, WeaveObject

    message = a.Message(
        id="m1",
        type="message",
        role="assistant",
        model="claude",
        content=[
            a.TextBlock(type="text", text="Let me check."),
            a.ToolUseBlock(type="tool_use", id="t1", name="lookup", input={"n": "C-1"}),
        ],
        stop_reason="tool_use",
        usage=a.Usage(input_tokens=3, output_tokens=2),
    )
    record = pydantic_object_record(message)
    ref = ObjectRef(entity="e", project="p", name="data", _digest="abc")
    wrapped = WeaveObject(record, ref=None, server=None, root=None)  # type: ignore[arg-type]
    row = WeaveDict(
        {"reply": wrapped, "ref": ref, "n": box(3), "items": WeaveList([box("a")], server=None)},
        server=None,  # type: ignore[arg-type]
    )
    data = plain({"row": row, "point": Point(1, datetime.datetime(2026, 3, 2)), "omitted": a})
    reply = data["row"]["reply"]
    assert reply["content"][1] == {
        "id": "t1",
        "input": {"n": "C-1"},
        "name": "lookup",
        "type": "tool_use",
        **{k: None for k in reply["content"][1] if k not in ("id", "input", "name", "type")},
    }
    assert reply["content"][0]["text"] == "Let me check." and "_class_name" not in reply
    assert data["row"]["ref"] == "weave:///e/p/object/data:abc"
    assert data["row"]["n"] == 3 and type(data["row"]["n"]) is int
    assert data["row"]["items"] == ["a"] and type(data["row"]["items"][0]) is str
    assert data["point"] == {"x": 1, "when": "2026-03-02T00:00:00"}
    assert isinstance(data["omitted"], str)  # a module: its text, never an exception
    sentinels = {"stream": "<anthropic.Omit object at 0x7f00>", "timeout": "NOT_GIVEN", "x": 1}
    assert plain(sentinels) == {"x": 1}
    assert plain({"kept": anthropic_omit()}) == {}
    assert json.loads(json.dumps(data)) == data


def anthropic_omit() -> Any:
    import anthropic

    return anthropic.omit


def test_the_tracer_keeps_weave_objects_and_redacts_the_rest(tmp_path: Path) -> None:
    """The writer's side of the same conversion (`Tracer._plain`, on a real weave client):
    weave's own objects are kept for weave to save as refs, every string is redacted, models
    are recorded without their defaults."""
    import weave
    from weave.trace.vals import WeaveDict

    from harness.secrets import MASK
    from harness.transcript import Message

    tracer = Tracer(open_local_client(tmp_path / "traces.db"))
    try:
        dataset = weave.Dataset(rows=[{"q": 1}])
        row = WeaveDict({"q": 1}, server=tracer.client.server)
        key = "sk-" + "a" * 40
        data = tracer._plain(
            {"dataset": dataset, "row": row, "message": Message(role="user", content=key)}
        )
    finally:
        tracer.close()
    assert data["dataset"] is dataset and data["row"] is row
    assert data["message"] == {"role": "user", "content": MASK}

"""Production traces of an app the converter was not written for become regression tasks that
replay against the user's agent, with no hand-written domain.

The traces are recorded once, by the real weave client, from `tests/apps/support_app.py`: a root op
per user turn, the real `openai` client against the project's fake server (so weave patches it),
tool ops, threads, exceptions raised in tools, a thumbs-down with a note. They are converted from
the local trace store and from a JSONL export.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.domains import ToolError
from harness.domains.replay import ReplayEnvironment
from harness.grading.checks import CheckContext, run_check
from harness.specs.checks import Check
from harness.testing.fake_server import FakeServer
from harness.transcript import EndReason, EpisodeError, Message, Side, ToolCall, Transcript
from tests.apps.support_app import production_model
from tests.conftest import ROOT, run_cli

APP = ROOT / "tests/apps/support_app.py"
JUDGE_SCRIPT = """kind: script
rules:
  - when: {matches: "(?s)something went wrong.*Criterion:"}
    reply: '{"reasoning": "The agent gave up.", "passed": false}'
  - when: {matches: "(?s)Criterion:"}
    reply: '{"reasoning": "Handled.", "passed": true}'
"""


def task_files(folder: Path) -> dict[str, dict]:
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted(folder.glob("*.yaml"))}


def to_tasks(*args: object, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    done = run_cli("traces", "to-tasks", *args, cwd=cwd)
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The app's production sessions in a local store and a JSONL export, each converted."""
    folder = tmp_path_factory.mktemp("production")
    store, export = folder / "traces.db", folder / "calls.jsonl"
    with FakeServer(responder=production_model).running() as model:
        served = subprocess.run(
            [sys.executable, str(APP), str(store), model.url],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert served.returncode == 0, served.stderr
        assert model.snapshot()["requests"] == 18  # the app's model calls went to the server
    exported = run_cli("traces", "export", "--trace-store", store, "--out", export)
    assert exported.returncode == 0, exported.stderr
    for source, out in ((store, folder / "from-store"), (export, folder / "from-jsonl")):
        source_args = ("--trace-store", source) if source == store else ("--source", source)
        made = to_tasks(*source_args, "--out", out)
        assert made.returncode == 0, made.stderr
        assert made.stdout.strip().endswith("5 made, 0 skipped, 0 unreadable"), made.stdout
    return {"folder": folder, "store": store, "export": export, "tasks": folder / "from-store"}


def calls(export: Path) -> list[dict]:
    return [json.loads(line) for line in export.read_text().splitlines()]


def short(op_name: str) -> str:
    return op_name.split("/op/")[-1].split(":")[0]


def test_both_sources_give_the_same_tasks_and_one_task_per_failure(recorded) -> None:
    tasks = task_files(recorded["tasks"])
    assert tasks == task_files(recorded["folder"] / "from-jsonl")
    records = calls(recorded["export"])
    not_found = [r for r in records if short(r["op_name"]) == "cancel_order"]
    assert len(not_found) == 3 and all("KeyError" in r["exception"] for r in not_found)
    [cluster] = [t for t in tasks.values() if "cancel_order" in t["tags"]]
    source = cluster["source"]
    assert source["count"] == 3 and source["kind"] == "failure"
    assert sorted(source["trace_ids"]) == sorted(r["trace_id"] for r in not_found)
    assert sorted(source["call_ids"]) == sorted(r["id"] for r in not_found)
    started = sorted(r["started_at"] for r in not_found)
    assert (source["first_seen"], source["last_seen"]) == (started[0], started[-1])
    assert source["signature"] == "error | cancel_order | KeyError | order <id> not found"
    kinds = sorted((t["source"]["kind"], t["source"]["count"]) for t in tasks.values())
    assert kinds == [("failure", 1), ("failure", 1), ("failure", 3), ("success", 1), ("success", 1)]
    # a conversation with any failure never becomes a success task
    good = {r["trace_id"] for r in records if r["thread_id"] in ("s-track", "s-refund")}
    for task in tasks.values():
        assert (task["source"]["kind"] == "success") == (set(task["source"]["trace_ids"]) <= good)
    unshipped = next(
        t
        for t in tasks.values()
        if "get_tracking" in t["tags"] and t["source"]["kind"] == "failure"
    )
    assert unshipped["source"]["reasons"] == [
        "exception ValueError: carrier has no tracking number for O-2002 in tool get_tracking"
    ]
    assert {
        "kind": "no_error",
        "name": "no ValueError at get_tracking, no agent crash",
        "tool": "get_tracking",
        "error": "ValueError",
    } in unshipped["checks"]


def test_the_note_stating_the_right_amount_becomes_a_check(recorded) -> None:
    [mug] = [
        t for t in task_files(recorded["tasks"]).values() if "O-1003" in t["scenario"]["reason"]
    ]
    assert mug["source"]["reasons"][0].startswith("negative feedback: Refunded the whole order")
    checks = mug["checks"]
    assert {
        "kind": "tool_called",
        "name": "calls issue_refund with amount 12.99",
        "tool": "issue_refund",
        "args": {"order_id": "O-1003", "amount": 12.99},
    } in checks
    assert {
        "kind": "tool_called",
        "name": "never calls issue_refund with amount 89.97",
        "tool": "issue_refund",
        "args": {"amount": 89.97},
        "min_count": 0,
        "max_count": 0,
    } in checks
    judge = next(c for c in checks if c["kind"] == "llm_judge")
    assert "the right amount is $12.99" in judge["criterion"] and judge["hard"] is False


def test_no_generated_check_asserts_a_failing_call(recorded) -> None:
    records = calls(recorded["export"])
    failing = [
        (short(r["op_name"]), r["inputs"]) for r in records if r["exception"] and r["parent_id"]
    ]
    complained = [
        (short(r["op_name"]), r["inputs"])
        for r in records
        if r["thread_id"] == "s-mug" and short(r["op_name"]) == "issue_refund"
    ]
    assert len(failing) == 4 and len(complained) == 1
    for task in task_files(recorded["tasks"]).values():
        for check in task["checks"]:
            if check["kind"] != "tool_called" or check.get("min_count", 1) == 0:
                continue
            for tool, arguments in failing + complained:
                matches = tool == check["tool"] and all(
                    arguments.get(k) == v for k, v in check.get("args", {}).items()
                )
                assert not matches, (task["id"], check, arguments)


def test_tasks_validate_and_replay_the_buggy_logic_fails_and_the_fix_passes(
    recorded, tmp_path: Path
) -> None:
    tasks = recorded["tasks"]
    valid = run_cli("validate", tasks)
    assert valid.returncode == 0, valid.stderr
    assert valid.stdout.splitlines()[-1] == "5 valid, 0 invalid"
    judge = tmp_path / "judge.yaml"
    judge.write_text(JUDGE_SCRIPT)
    kinds = {Path(n).stem: t["source"]["kind"] for n, t in task_files(tasks).items()}
    for name, function in (("app", "respond"), ("app-fixed", "respond_fixed")):
        agent = tmp_path / f"{name}.yaml"
        agent.write_text(f"kind: agent\nname: {name}\nrunner: python\nentry: {APP}:{function}\n")
        done = run_cli(
            "run-eval",
            "--tasks",
            tasks,
            "--agent",
            agent,
            "--judge-model",
            f"{{id: scripted, script: {judge}}}",
            "--no-traces",
            "--store",
            tmp_path / "r.db",
            COLUMNS="200",
        )
        assert done.returncode == 0, done.stderr
        verdicts = {
            line.split("│")[1].strip(): line.split("│")[3].strip()
            for line in done.stdout.splitlines()
            if line.startswith("│ prod-")
        }
        if function == "respond":
            assert verdicts == {t: "fail" if k == "failure" else "pass" for t, k in kinds.items()}
        else:
            assert verdicts == dict.fromkeys(kinds, "pass")


def test_filters_for_every_source(recorded, cli, tmp_path: Path) -> None:
    export, store = recorded["export"], recorded["store"]
    records = calls(export)

    def made(*args: object) -> list[dict]:
        out = tmp_path / f"out{len(list(tmp_path.iterdir()))}"
        result = cli("traces", "to-tasks", *args, "--out", out)
        assert result.exit_code == 0, result.stderr
        return list(task_files(out).values()) if out.exists() else []

    for source in (("--source", export), ("--trace-store", store)):
        [one] = made(*source, "--thread", "s-cancel-2")
        assert one["source"]["count"] == 1 and one["scenario"]["known_info"] == {"id": "O-9002"}
        assert len(made(*source, "--thread", "s-track", "--thread", "s-mug")) == 2
    assert (
        len(made("--source", export, "--since", "2000-01-01", "--until", "2999-01-01T00:00:00Z"))
        == 5
    )
    assert made("--source", export, "--until", "2000-01-01") == []
    assert len(made("--source", export, "--since", "24h")) == 5
    assert made("--source", export, "--until", "7d") == []
    [cancel] = made("--source", export, "--op", "cancel_order")
    assert cancel["source"]["count"] == 3
    assert len(made("--source", export, "--op", "tool.issue_refund")) == 2
    assert len(made("--source", export, "--op", "chat.completions.create")) == 5
    ref = next(r["op_name"] for r in records if short(r["op_name"]) == "get_tracking")
    assert len(made("--source", export, "--op", ref)) == 2
    assert len(made("--source", export, "--op", ref.rsplit(":", 1)[0] + ":*")) == 2
    assert len(made("--source", export, "--status", "error")) == 2
    assert len(made("--source", export, "--negative")) == 1
    for option, value in (
        ("--since", "yesterday"),
        ("--until", "3 days"),
        ("--since", "2026-13-45"),
    ):
        result = cli(
            "traces", "to-tasks", "--source", export, option, value, "--out", tmp_path / "x"
        )
        assert result.exit_code == 2
        assert result.stderr.splitlines() == [
            f"{option} {value}: expected an ISO date or time (2026-11-30, 2026-11-30T10:00:00Z) "
            "or an age such as 30m, 24h, 7d or 2w"
        ]
    bad_domain = cli(
        "traces", "to-tasks", "--source", export, "--domain", "nosuch", "--out", tmp_path / "y"
    )
    assert bad_domain.exit_code == 2 and bad_domain.stderr.startswith(
        "--domain nosuch: unknown domain 'nosuch'"
    )
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def openai_call(trace: str, call_id: str, messages, output, tools=None, thread=None) -> dict:
    return {
        "id": call_id,
        "project_id": "acme/shop",
        "trace_id": trace,
        "parent_id": f"{trace}-root",
        "thread_id": thread,
        "op_name": "weave:///acme/shop/op/openai.chat.completions.create:v1",
        "started_at": "2026-11-30T10:00:01",
        "inputs": {"messages": messages, "tools": tools or []},
        "output": output,
        "attributes": {"weave": {"kind": "llm"}},
    }


THUMBS_UP = [{"feedback_type": "wandb.reaction.1", "payload": {"emoji": "👍"}}]


def root_call(trace: str, output="ok", thread=None, feedback=THUMBS_UP) -> dict:
    """A session's root call, rated with a thumbs-up by default: a session of known quality,
    so that it makes a task even where its tool calls cannot be read."""
    return {
        "id": f"{trace}-root",
        "project_id": "acme/shop",
        "trace_id": trace,
        "parent_id": None,
        "thread_id": thread,
        "op_name": "weave:///acme/shop/op/handle:v1",
        "started_at": "2026-11-30T10:00:00",
        "inputs": {"text": "hi"},
        "output": output,
        "feedback": feedback,
    }


def tool_call(trace: str, call_id: str, op: str, inputs: dict, output) -> dict:
    return {
        "id": call_id,
        "project_id": "acme/shop",
        "trace_id": trace,
        "parent_id": f"{trace}-root",
        "op_name": f"weave:///acme/shop/op/{op}:v1",
        "started_at": "2026-11-30T10:00:02",
        "inputs": inputs,
        "output": output,
    }


ADDRESS_TOOL = {
    "type": "function",
    "function": {
        "name": "update_address",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}, "address": {"type": "string"}},
        },
    },
}


def asks(text: str, tool: str, arguments: str) -> list[dict]:
    return [
        {"role": "user", "content": text},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": tool, "arguments": arguments}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"status": "updated"}'},
    ]


def test_unknown_shapes_are_reported_per_trace_and_conversion_goes_on(tmp_path: Path) -> None:
    done_reply = {
        "choices": [
            {"message": {"role": "assistant", "content": "Done, O-1 now ships to 1 Main St."}}
        ]
    }
    good = [
        root_call("good"),
        openai_call(
            "good",
            "g1",
            asks(
                "Ship O-1 to 1 Main St",
                "update_address",
                '{"order_id": "O-1", "address": "1 Main St"}',
            ),
            done_reply,
            [ADDRESS_TOOL],
        ),
        tool_call(
            "good",
            "g2",
            "update_address",
            {"order_id": "O-1", "address": "1 Main St"},
            {"status": "updated"},
        ),
    ]
    bad_arguments = [
        root_call("badargs"),
        openai_call(
            "badargs",
            "b1",
            asks("Ship O-2 to 2 Elm St", "update_address", "order O-2, 2 Elm St"),
            done_reply,
            [ADDRESS_TOOL],
        ),
    ]
    positional = [
        root_call("positional"),
        openai_call(
            "positional",
            "p1",
            asks(
                "Ship O-3 to 3 Oak St",
                "update_address",
                '{"order_id": "O-3", "address": "3 Oak St"}',
            ),
            done_reply,
            [ADDRESS_TOOL],
        ),
        tool_call(
            "positional",
            "p2",
            "update_address",
            {"args": ["O-3", "3 Oak St"]},
            {"status": "updated"},
        ),
    ]
    not_a_list = [root_call("nolist"), openai_call("nolist", "n1", "Ship O-4 please", done_reply)]
    source = tmp_path / "calls.jsonl"
    source.write_text(
        "".join(json.dumps(c) + "\n" for c in good + bad_arguments + positional + not_a_list)
    )
    out = tmp_path / "out"
    done = to_tasks("--source", source, "--out", out)
    assert done.returncode == 0, done.stderr
    problems = [line for line in done.stderr.splitlines() if line.startswith("unreadable")]
    assert problems == [
        "unreadable trace badargs (trace badargs, call b1): tool call update_address: arguments are not a JSON object: 'order O-2, 2 Elm St'",
        "unreadable trace nolist (trace nolist, call n1): model call of an unknown shape (ValueError: its `messages` input is str, not a list)",
        "unreadable trace nolist: malformed calls: ValueError: no message could be read",
        "unreadable trace positional (trace positional, call p2): tool op update_address: inputs (args) are not parameters of the offered tool (address, order_id); not replayed",
    ]
    assert done.stdout.strip().endswith("3 made, 0 skipped, 4 unreadable")
    made = task_files(out)
    recorded = sorted(len(t["start"]["state"]["recordings"]) for t in made.values())
    assert recorded == [0, 0, 1]  # neither the positional op nor the unreadable call is replayed
    assert not list(out.glob(".*"))  # no half-written file

    # the support desk's domain hooks raise on this app's arguments: reported, never a traceback
    support = to_tasks("--source", source, "--out", tmp_path / "support", "--domain", "support")
    assert support.returncode == 0, support.stderr
    assert (
        "domain support: expected_state failed on the recorded calls: KeyError: 'street'"
        in support.stderr
    )
    assert {t["domain"] for t in task_files(tmp_path / "support").values()} == {"support"}


USER_DOMAIN = '''
from harness.domains import Environment, TraceReplay, tool


class Shop(TraceReplay, Environment):
    """The shop's own domain, seeded from what production's lookups returned."""

    @tool
    def lookup_order(self, order_id: str) -> dict:
        return self.state["orders"][order_id]

    @tool
    def cancel_order(self, order_id: str) -> dict:
        return {"order_id": order_id, "status": self.state["orders"][order_id]["status"]}

    @tool
    def get_tracking(self, order_id: str) -> dict:
        return {"order_id": order_id}

    @tool
    def issue_refund(self, order_id: str, amount: float) -> dict:
        return {"order_id": order_id, "amount": amount}

    @classmethod
    def observed_state(cls, calls):
        orders = {a["order_id"]: r for name, a, r in calls if name == "lookup_order"}
        return {"orders": orders}
'''


def test_a_users_own_domain_is_seeded_through_its_hook(recorded, tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(USER_DOMAIN)
    out = tmp_path / "tasks/regression"
    done = to_tasks(
        "--source",
        recorded["export"],
        "--out",
        "tasks/regression",
        "--domain",
        "shop.py:Shop",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    tasks = task_files(out)
    assert {t["domain"] for t in tasks.values()} == {"../../shop.py:Shop"}
    mug = next(t for t in tasks.values() if "O-1003" in t["scenario"]["reason"])
    assert mug["start"]["state"]["orders"]["O-1003"]["total"] == 89.97
    assert run_cli("validate", out).returncode == 0


def test_a_killed_recording_leaves_interrupted_calls(tmp_path: Path) -> None:
    store = tmp_path / "traces.db"
    with FakeServer(responder=production_model).running() as model:
        app = subprocess.Popen(
            [sys.executable, str(APP), str(store), model.url, "--hang"],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert app.stdout is not None and app.stdout.readline().strip() == "ready"
        finally:
            os.kill(app.pid, signal.SIGKILL)
            app.wait(30)
    listed = run_cli("traces", "list", "--trace-store", store, COLUMNS="200")
    assert listed.returncode == 0, listed.stderr
    assert "│ interrupted │" in listed.stdout
    assert "1 interrupted: the process recording them ended before they did" in listed.stdout
    done = to_tasks("--trace-store", store, "--out", tmp_path / "out")
    assert done.returncode == 0
    assert "interrupted: its recording process ended mid-call; not converted" in done.stderr


def replay(state: dict) -> ReplayEnvironment:
    return ReplayEnvironment.for_state(state)(state)


REPLAY_STATE = {
    "tools": [
        {
            "name": "lookup_order",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
    ],
    "recordings": [
        {"tool": "lookup_order", "arguments": {"order_id": "O-1"}, "result": {"status": "shipped"}},
        {
            "tool": "lookup_order",
            "arguments": {"order_id": "O-1"},
            "result": {"status": "delivered"},
        },
        {
            "tool": "lookup_order",
            "arguments": {"order_id": "O-9"},
            "error": "KeyError: 'Order O-9 not found'",
        },
    ],
}


def test_the_replay_domain_answers_what_production_answered() -> None:
    env = replay(REPLAY_STATE)
    assert type(env).tool_names() == ["lookup_order"]

    def call(**arguments):
        outcome = asyncio.run(env.call("lookup_order", arguments))
        return outcome.is_error, outcome.content

    assert call(order_id="O-1") == (False, '{"status": "shipped"}')
    assert call(order_id="O-1") == (False, '{"status": "delivered"}')
    assert call(order_id="O-1") == (False, '{"status": "delivered"}')
    assert call(order_id="O-9") == (
        True,
        "Error: KeyError: 'Order O-9 not found'",
    )
    # a call production never made answers like the nearest recording (a successful one first)
    assert call(order_id="O-5") == (False, '{"status": "shipped"}')
    assert call(order=5) == (
        True,
        "Error: invalid arguments for lookup_order: arguments: 'order_id' is a required property",
    )
    fallback = replay({**REPLAY_STATE, "fallback": {"*": {"result": {"status": "unknown"}}}})
    assert (
        asyncio.run(fallback.call("lookup_order", {"order_id": "O-5"})).content
        == '{"status": "unknown"}'
    )
    strict = replay({**REPLAY_STATE, "unrecorded": "error"})
    assert asyncio.run(strict.call("lookup_order", {"order_id": "O-5"})).content == (
        'Error: no recorded result for lookup_order(order_id="O-5"): production never made this '
        "call, so the replay cannot answer it"
    )
    with pytest.raises(ToolError, match="no recorded result for lookup_order"):
        strict.call_data_tool("lookup_order", {"order_id": "O-7"})


def test_a_replay_task_names_only_its_recorded_tools(tmp_path: Path) -> None:
    task = {
        "kind": "task",
        "id": "r",
        "title": "t",
        "level": 1,
        "domain": "replay",
        "persona": {
            "name": "p",
            "description": "d",
            "model": "scripted",
            "scripted_turns": [{"reply": "bye ###STOP###"}],
        },
        "scenario": {"reason": "r"},
        "start": {"first_message": "hi", "state": REPLAY_STATE},
        "checks": [{"kind": "tool_called", "tool": "cancel_order"}],
    }
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(task))
    done = run_cli("validate", path)
    assert done.returncode == 2
    assert "checks[0].tool: unknown tool 'cancel_order'; known: lookup_order" in done.stderr


def transcript(messages: list[Message], end=EndReason.USER_STOP, error=None) -> Transcript:
    return Transcript(
        task_id="t", variant="v", variant_hash="h", messages=messages, end_reason=end, error=error
    )


def grade(check: dict, transcript_: Transcript) -> tuple[str, str]:
    from pydantic import TypeAdapter

    from harness.specs.task import Task

    spec = TypeAdapter(Check).validate_python(check)
    task = Task.model_validate(
        {
            "kind": "task",
            "id": "t",
            "title": "t",
            "level": 1,
            "domain": "replay",
            "persona": "p",
            "scenario": {"reason": "r"},
            "checks": [check],
        }
    )
    result = asyncio.run(run_check(spec, transcript_, CheckContext(task)))
    return result.outcome, result.reason


def test_no_error_fails_on_the_error_at_the_tool_or_a_crash() -> None:
    refund = ToolCall(id="c1", name="issue_refund", arguments={"order_id": "O-9"})
    asked = Message(role="assistant", tool_calls=[refund])
    failed = Message(
        role="tool",
        tool_call_id="c1",
        name="issue_refund",
        content="Error: KeyError: 'Order O-9 not found'",
        is_error=True,
    )
    other = Message(
        role="tool",
        tool_call_id="c1",
        name="issue_refund",
        content="Error: no recorded result for issue_refund(...)",
        is_error=True,
    )
    check = {"kind": "no_error", "tool": "issue_refund", "error": "KeyError"}
    assert grade(check, transcript([asked, failed]))[0] == "fail"
    assert grade(check, transcript([asked, other])) == (
        "pass",
        "no KeyError at issue_refund and no agent crash",
    )
    assert grade({**check, "tool": "lookup_order"}, transcript([asked, failed]))[0] == "pass"
    crashed = transcript(
        [], EndReason.AGENT_CRASH, EpisodeError(side=Side.AGENT, message="KeyError: 'x'")
    )
    assert grade({"kind": "no_error"}, crashed) == ("fail", "the agent crashed: KeyError: 'x'")
    assert grade({"kind": "no_error"}, transcript([asked, failed]))[0] == "pass"


def test_no_false_success_fails_a_claim_after_an_error_value_or_a_tool_error() -> None:
    reset = ToolCall(id="c1", name="reset_password", arguments={"username": "jdoe"})
    asked = Message(role="assistant", tool_calls=[reset])

    def answered(content: str, is_error: bool = False) -> Message:
        return Message(
            role="tool",
            tool_call_id="c1",
            name="reset_password",
            content=content,
            is_error=is_error,
        )

    locked = answered('{"error": "account jdoe is locked"}')
    done = Message(role="assistant", content="Done! A temporary password was sent.")
    owned = Message(role="assistant", content="Your account is locked, so I could not reset it.")
    check = {"kind": "no_false_success", "tool": "reset_password"}
    outcome, reason = grade(check, transcript([asked, locked, done]))
    assert outcome == "fail" and "account jdoe is locked" in reason
    assert grade(check, transcript([asked, locked, owned]))[0] == "pass"
    for failed in (
        answered('{"ok": false, "message": "no licences"}'),
        answered('{"status_code": 503, "message": "down"}'),
        answered('"PermissionError: access denied"'),
        answered("Error: TimeoutError", is_error=True),
    ):
        assert grade(check, transcript([asked, failed, done]))[0] == "fail", failed.content
    sent = answered('{"ok": true, "sent_to": "jane@corp.example"}')
    assert grade(check, transcript([asked, sent, done]))[0] == "pass"
    assert grade({**check, "tool": "lookup_user"}, transcript([asked, locked, done]))[0] == "pass"


WRITER_SCRIPT = """kind: script
rules:
  - when: {matches: "(?s)cancel_order"}
    reply: The agent checks that the order exists before cancelling it, and asks the user to check the number when it does not.
  - reply: The agent resolves the request correctly.
"""


def test_a_model_writes_the_criteria_and_plays_the_user(recorded, cli, tmp_path: Path) -> None:
    writer = tmp_path / "writer.yaml"
    writer.write_text(WRITER_SCRIPT)
    out = tmp_path / "out"
    result = cli(
        "traces",
        "to-tasks",
        "--source",
        recorded["export"],
        "--out",
        out,
        "--status",
        "error",
        "--criteria-model",
        f"{{id: scripted, script: {writer}}}",
        "--persona-model",
        "openai/gpt-4.1-mini",
    )
    assert result.exit_code == 0, result.stderr
    tasks = task_files(out)
    criteria = {
        t["source"]["signature"].split(" | ")[1]: next(
            c["criterion"] for c in t["checks"] if c["kind"] == "llm_judge"
        )
        for t in tasks.values()
    }
    assert criteria == {
        "cancel_order": "The agent checks that the order exists before cancelling it, and asks the user to check the number when it does not.",
        "get_tracking": "The agent resolves the request correctly.",
    }
    for task in tasks.values():
        assert "replayed-turns" not in task["tags"]
        assert (
            task["persona"]["model"] == "openai/gpt-4.1-mini"
            and "scripted_turns" not in task["persona"]
        )
    broken = cli(
        "traces",
        "to-tasks",
        "--source",
        recorded["export"],
        "--out",
        tmp_path / "templates",
        "--status",
        "error",
        "--criteria-model",
        "nosuch/model",
    )
    assert broken.exit_code == 0, broken.stderr
    assert "note --criteria-model: criteria model: unknown model provider 'nosuch'" in broken.stderr
    for task in task_files(tmp_path / "templates").values():
        assert "replayed-turns" in task["tags"]
        judge = next(c for c in task["checks"] if c["kind"] == "llm_judge")
        assert judge["criterion"].startswith("In production, the tool ")


def test_a_tool_whose_parameters_are_no_json_schema_is_reported_not_written(tmp_path: Path) -> None:
    broken = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "objekt"}}}
    reply = {"choices": [{"message": {"role": "assistant", "content": "It shipped."}}]}
    session = [
        root_call("t1"),
        openai_call("t1", "l1", [{"role": "user", "content": "Where is O-1?"}], reply, [broken]),
    ]
    source = tmp_path / "calls.jsonl"
    source.write_text("".join(json.dumps(c) + "\n" for c in session))
    done = to_tasks("--source", source, "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("0 made, 0 skipped, 1 unreadable")
    assert (
        "the task would not validate: start.state: tool lookup: parameters are not a JSON Schema: 'objekt' is not valid"
        in done.stderr
    )
    assert not list((tmp_path / "out").iterdir())


def test_a_note_naming_the_call_that_went_wrong_never_requires_it() -> None:
    import re

    from harness.production.derive import note_checks
    from harness.production.reconstruct import Conversation, Observation

    production = Conversation(
        key="k",
        project="p",
        transcript=transcript([]),
        observations=[
            Observation("issue_refund", {"order_id": "O-1", "amount": 89.97}, {"ok": True})
        ],
    )
    ids = {"id": re.compile(r"\b[A-Z]{1,4}-\d+\b")}
    tools = {"issue_refund", "transfer_to_human"}

    def checks(note: str) -> list[tuple[str, dict, int]]:
        found = note_checks(note, production, tools, ids)
        return [(c["name"], c.get("args", {}), c.get("max_count", -1)) for c in found]

    assert checks("Called issue_refund on a delivered order.") == []
    assert checks("It should not have used issue_refund.") == [("never calls issue_refund", {}, 0)]
    assert checks("Should have used transfer_to_human.") == [("calls transfer_to_human", {}, -1)]
    assert checks("Wrong: the right amount is $12.99, not $89.97.") == [
        ("calls issue_refund with amount 12.99", {"order_id": "O-1", "amount": 12.99}, -1),
        ("never calls issue_refund with amount 89.97", {"amount": 89.97}, 0),
    ]

"""Production traces become regression tasks, and the whole flywheel turns offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from harness.production.calls import CallRecord, Filters, Unreadable, read_jsonl
from harness.production.reconstruct import conversations
from harness.specs.load import load_task
from tests.conftest import JUDGE, ROOT, run_cli

DESK = str(ROOT / "tasks/support/data/desk.json")


def serve_production(workspace: Path) -> Path:
    """Run the instrumented production bot's sessions into a local trace store."""
    store = workspace / "prod-traces.db"
    done = subprocess.run(
        [sys.executable, "agents/serve_prod_bot.py", str(store)],
        cwd=workspace,
        env={**os.environ, "PYTHONPATH": str(workspace / "agents")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return store


def task_files(folder: Path) -> dict[str, dict]:
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted(folder.glob("*.yaml"))}


def test_traces_become_tasks_that_fail_production_and_pass_the_fix(workspace: Path) -> None:
    store = serve_production(workspace)
    out = workspace / "tasks/regression"
    made = run_cli(
        "traces",
        "to-tasks",
        "--source",
        "local",
        "--trace-store",
        store,
        "--out",
        out,
        "--state-file",
        workspace / "tasks/support/data/desk.json",
        "--domain",
        "support",
        cwd=workspace,
    )
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip().endswith("4 made, 0 skipped, 0 unreadable")
    tasks = task_files(out)
    kinds = sorted((t["source"]["kind"], t["source"]["count"]) for t in tasks.values())
    assert kinds == [("failure", 1), ("failure", 2), ("success", 1), ("success", 1)]
    crash = next(t for t in tasks.values() if t["source"]["count"] == 2)
    assert crash["source"]["reasons"] == [
        "exception AttributeError: 'NoneType' object has no attribute 'upper'"
    ]
    refund = next(
        t
        for t in tasks.values()
        if "issue_refund" in t["tags"] and t["source"]["kind"] == "failure"
    )
    assert {
        "kind": "tool_called",
        "name": "never calls issue_refund",
        "tool": "issue_refund",
        "min_count": 0,
        "max_count": 0,
    } in refund["checks"]
    assert any(
        c["kind"] == "llm_judge" and "80 days ago" in c["criterion"] for c in refund["checks"]
    )
    assert refund["start"]["state"]["orders"]["O-1004"]["status"] == "delivered"
    success = next(t for t in tasks.values() if "O-1002" in t["scenario"]["reason"])
    assert {
        "kind": "text",
        "name": "states 1Z999AA10123456784",
        "contains": "1Z999AA10123456784",
    } in success["checks"]
    for path in out.glob("*.yaml"):
        load_task(path)  # every file validates

    again = run_cli("traces", "to-tasks", "--trace-store", store, "--out", out, cwd=workspace)
    assert again.stdout.strip().endswith("0 made, 4 skipped, 0 unreadable")
    assert task_files(out) == tasks

    def evaluate(agent: str) -> dict[str, str]:
        done = run_cli(
            "run-eval",
            "--tasks",
            "tasks/regression",
            "--agent",
            agent,
            "--judge-model",
            JUDGE,
            "--no-traces",
            cwd=workspace,
            COLUMNS="200",
        )
        assert done.returncode == 0, done.stderr
        return {
            line.split("│")[1].strip(): line.split("│")[3].strip()
            for line in done.stdout.splitlines()
            if line.startswith("│ prod-")
        }

    production = evaluate("agents/prod-bot.yaml")
    assert sorted(production.items()) == sorted(
        (Path(name).stem, "fail" if t["source"]["kind"] == "failure" else "pass")
        for name, t in tasks.items()
    )
    fixed = evaluate("agents/prod-bot-fixed.yaml")
    assert set(fixed.values()) == {"pass"} and len(fixed) == 4


def test_jsonl_export_round_trip(workspace: Path) -> None:
    store = serve_production(workspace)
    exported = workspace / "calls.jsonl"
    done = run_cli(
        "traces", "export", "--source", "local", "--trace-store", store, "--out", exported, cwd=workspace
    )
    assert done.returncode == 0 and done.stdout.startswith("wrote ")
    first = json.loads(exported.read_text().splitlines()[0])
    for field in (
        "id",
        "project_id",
        "op_name",
        "trace_id",
        "parent_id",
        "thread_id",
        "started_at",
        "ended_at",
        "inputs",
        "output",
        "exception",
        "attributes",
        "summary",
        "feedback",
    ):
        assert field in first
    from_store, from_file = workspace / "a", workspace / "b"
    for source, out in (("local", from_store), (str(exported), from_file)):
        made = run_cli(
            "traces",
            "to-tasks",
            "--source",
            source,
            "--trace-store",
            store,
            "--out",
            out,
            "--state-file",
            DESK,
            "--domain",
            "support",
            cwd=workspace,
        )
        assert made.returncode == 0, made.stderr
    assert task_files(from_store) == task_files(from_file) and len(task_files(from_file)) == 4


def call(
    thread: str,
    trace: str,
    call_id: str,
    op: str,
    inputs: dict,
    output=None,
    parent: str | None = None,
    kind: str | None = None,
    exception: str | None = None,
    started: str = "2026-11-30T10:00:00",
    feedback: list | None = None,
) -> dict:
    return {
        "id": call_id,
        "project_id": "acme/support",
        "op_name": f"weave:///acme/support/op/{op}:v1",
        "trace_id": trace,
        "parent_id": parent,
        "thread_id": thread,
        "started_at": started,
        "inputs": inputs,
        "output": output,
        "exception": exception,
        "attributes": {"weave": {"kind": kind}} if kind else {},
        "summary": {},
        "feedback": feedback or [],
    }


def crash_session(n: int) -> list[dict]:
    order = f"O-{3000 + n}"
    said = [{"role": "user", "content": f"Where is my order {order}?"}]
    error = json.dumps({"type": "KeyError", "message": f"'tracking' missing for {order}"})
    return [
        call(
            f"t{n}",
            f"tr{n}",
            f"c{n}",
            "handle_turn",
            {"conversation": said},
            kind="agent",
            exception=error,
            started=f"2026-11-30T10:{n // 60:02d}:{n % 60:02d}",
        ),
        call(
            f"t{n}",
            f"tr{n}",
            f"d{n}",
            "get_order",
            {"order_id": order},
            {"order_id": order, "status": "processing"},
            parent=f"c{n}",
            kind="tool",
            started=f"2026-11-30T10:{n // 60:02d}:{n % 60:02d}.5",
        ),
    ]


def write_jsonl(path: Path, calls: list[dict]) -> Path:
    path.write_text("".join(json.dumps(c) + "\n" for c in calls))
    return path


def test_fifty_traces_of_one_failure_make_one_task(tmp_path: Path) -> None:
    source = write_jsonl(
        tmp_path / "calls.jsonl",
        [c for n in range(50) for c in crash_session(n)] + [call("x", "x", "x", "other_op", {})],
    )
    done = run_cli(
        "traces",
        "to-tasks",
        "--source",
        source,
        "--out",
        tmp_path / "out",
        "--state-file",
        DESK,
        "--domain",
        "support",
    )
    assert done.returncode == 0, done.stderr
    [task] = task_files(tmp_path / "out").values()
    assert task["source"]["traces"] == 50
    assert task["source"]["kind"] == "failure"
    assert len(task["source"]["trace_ids"]) == 50  # every trace (was: the first 20)
    assert "unreadable thread x: no conversation found (ops: other_op)" in done.stderr


def test_a_malformed_line_is_reported_and_skipped(tmp_path: Path) -> None:
    lines = [json.dumps(c) for c in crash_session(1)]
    source = tmp_path / "calls.jsonl"
    source.write_text(
        lines[0] + "\n{not json\n" + json.dumps({"id": "only-an-id"}) + "\n" + lines[1] + "\n"
    )
    problems: list[Unreadable] = []
    records = list(read_jsonl(source, Filters(), problems))
    assert [r.id for r in records] == ["c1", "d1"]
    assert [p.where for p in problems] == [f"{source}:2", f"{source}:3"]
    assert "not a call" in str(problems[0]) and "op_name" in str(problems[1])
    done = run_cli("traces", "to-tasks", "--source", source, "--out", tmp_path / "out")
    assert done.returncode == 0
    assert done.stdout.strip().endswith("1 made, 0 skipped, 2 unreadable")


def test_autopatched_openai_and_anthropic_calls_are_reconstructed() -> None:
    openai_messages = [
        {"role": "system", "content": "You are the support agent."},
        {"role": "user", "content": "Where is order O-1002?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_order", "arguments": '{"order_id": "O-1002"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "shipped"}'},
    ]
    openai_call = call(
        None,
        "trA",
        "a1",
        "openai.chat.completions.create",
        {"model": "gpt-4.1-mini", "messages": openai_messages},
        {"choices": [{"message": {"role": "assistant", "content": "It has shipped."}}]},
    )
    anthropic_call = call(
        None,
        "trB",
        "b1",
        "anthropic.Messages.create",
        {
            "model": "claude-sonnet-4-5",
            "system": "You are the support agent.",
            "messages": [
                {"role": "user", "content": "Refund O-1001 please."},
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "tu1",
                            "name": "issue_refund",
                            "input": {"order_id": "O-1001", "reason": "r"},
                        }
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "tu1", "content": '{"amount": 59.0}'}
                    ],
                },
            ],
        },
        {"content": [{"type": "text", "text": "Refunded $59.00."}]},
    )
    problems: list[Unreadable] = []
    found = list(
        conversations(
            [CallRecord.model_validate(openai_call), CallRecord.model_validate(anthropic_call)],
            problems,
        )
    )
    assert problems == []
    by_trace = {c.trace_ids[0]: c for c in found}
    a = by_trace["trA"].transcript
    assert [(m.role, m.content) for m in a.messages if m.content] == [
        ("user", "Where is order O-1002?"),
        ("tool", '{"status": "shipped"}'),
        ("assistant", "It has shipped."),
    ]
    assert [(c.name, c.arguments) for c in a.tool_calls()] == [
        ("get_order", {"order_id": "O-1002"})
    ]
    observed = by_trace["trB"].observations
    assert [(o.name, o.arguments, o.result) for o in observed] == [
        ("issue_refund", {"order_id": "O-1001", "reason": "r"}, {"amount": 59.0})
    ]
    assert by_trace["trB"].transcript.messages[-1].content == "Refunded $59.00."


def test_harness_episodes_read_back_as_conversations(tmp_path: Path) -> None:
    traces = tmp_path / "traces.db"
    done = run_cli(
        "run-eval",
        "--tasks",
        "tasks/support/refund-by-email.yaml",
        "--agent",
        "agents/support-python.yaml",
        "--store",
        tmp_path / "r.db",
        "--traces",
        traces,
        "--judge-model",
        JUDGE,
    )
    assert done.returncode == 0, done.stderr
    made = run_cli(
        "traces",
        "to-tasks",
        "--trace-store",
        traces,
        "--out",
        tmp_path / "out",
        "--state-file",
        DESK,
        "--domain",
        "support",
    )
    assert made.returncode == 0, made.stderr
    tasks = list(task_files(tmp_path / "out").values())
    episode_tasks = [t for t in tasks if "find_customer" in t["tags"]]
    assert len(episode_tasks) == 1
    checks = episode_tasks[0]["checks"]
    assert {
        "kind": "state",
        "name": "same final state",
        "expect": {"orders": {"O-1006": {"status": "refunded"}}},
    } in checks

"""The flywheel on an app the converter was not written for: `tests/apps/helpdesk_app.py`, an IT
helpdesk recorded by the real weave client with the real `openai` client streaming from the
project's fake server (a session root with turn ops, a triage sub-agent with its own model
call, parallel tool calls on a thread pool, failures returned as values, silent failures,
feedback on nested calls, history re-sent as visible text). Its traces become tasks that the
buggy logic fails and the fix passes, the gate tells them apart with its default settings, and
a climb learns the fix from them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.outcomes import DEFAULT
from harness.production.calls import Filters, read_jsonl
from harness.production.reconstruct import conversations
from harness.testing.fake_server import FakeServer
from tests.apps.helpdesk_app import FEEDBACK, SESSIONS, production_model
from tests.conftest import ROOT, reworded_app, run_cli

APP = ROOT / "tests/apps/helpdesk_app.py"
# A judge that never gives a judgement: the generated judge criteria are soft, so it decides
# nothing, as the embedded default judge decided nothing on these tasks.
MUTE_JUDGE = "kind: script\nrules:\n  - reply: I think the agent did fine.\n"
REFLECTION = """kind: script
rules:
  - when: {matches: "(?s)claimed success after|priority high"}
    reply: |-
      ```
      Read every tool result before telling the user a step worked; say what failed.
      Open outages and urgent requests at high priority.
      ```
  - reply: |-
      ```
      Be helpful.
      ```
"""
MODES = 12  # silent failures at 10 (tool, error) pairs, the triage crash, the priority notes
# 6 success tasks: the unrated sessions that completed. The `monitor` session opened its ticket
# at `normal` priority, the step the priority notes single out: of unknown quality, no task.
TASKS = MODES + 6


@pytest.fixture(scope="module")
def flywheel(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The app's production sessions recorded, exported and converted with the defaults."""
    folder = tmp_path_factory.mktemp("helpdesk")
    store, export, tasks = folder / "traces.db", folder / "calls.jsonl", folder / "tasks"
    with FakeServer(responder=production_model).running() as model:
        served = subprocess.run(
            [sys.executable, str(APP), str(store), model.url],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert served.returncode == 0, served.stderr
    assert run_cli("traces", "export", "--trace-store", store, "--out", export).returncode == 0
    made = run_cli("traces", "to-tasks", "--trace-store", store, "--out", tasks)
    assert made.returncode == 0 and "Traceback" not in made.stderr, made.stderr
    assert made.stdout.strip().endswith("0 unreadable"), made.stdout
    (folder / "judge.yaml").write_text(MUTE_JUDGE)
    return {"folder": folder, "export": export, "tasks": tasks}


def tasks_of(folder: Path) -> dict[str, dict]:
    return {p.stem: yaml.safe_load(p.read_text()) for p in sorted(folder.glob("*.yaml"))}


def records(export: Path) -> list[dict]:
    return [json.loads(line) for line in export.read_text().splitlines()]


def threads_of(task: dict, export: Path) -> set[str]:
    traces = set(task["source"]["trace_ids"])
    return {r["thread_id"] for r in records(export) if r["trace_id"] in traces}


def test_the_recording_has_every_shape(flywheel) -> None:
    rows = records(flywheel["export"])
    ops = {r["op_name"].split("/op/")[-1].split(":")[0] for r in rows}
    assert {"chat_session", "handle_turn", "triage", "openai.chat.completions.create"} <= ops
    streamed = [r for r in rows if r["inputs"].get("stream")]
    assert streamed and all(r["output"]["choices"][0]["message"] for r in streamed)
    parallel = [
        r
        for r in streamed
        if len(r["output"]["choices"][0]["message"].get("tool_calls") or []) == 2
    ]
    assert parallel, "a model call asked for two tools at once"
    rated = [r for r in rows if r["feedback"]]
    assert rated and all(r["parent_id"] is not None for r in rated), "feedback on turn calls"


def test_each_session_replays_its_real_user_turns(flywheel) -> None:
    seen = {}
    for conversation in conversations(read_jsonl(flywheel["export"], Filters(), []), []):
        seen[conversation.key.removeprefix("thread ")] = conversation.user_texts()
    assert seen == SESSIONS  # no sub-agent message, no re-sent history, in order
    for task in tasks_of(flywheel["tasks"]).values():
        persona = task["persona"]
        replayed = [task["start"]["first_message"]]
        replayed += [t["reply"] for t in persona["scripted_turns"] if "when" in t]
        assert any(SESSIONS[thread] == replayed for thread in threads_of(task, flywheel["export"]))


def test_one_task_per_failure_mode_and_silent_failures_are_failures(flywheel) -> None:
    tasks = tasks_of(flywheel["tasks"])
    failures = {k: t for k, t in tasks.items() if t["source"]["kind"] == "failure"}
    assert len(failures) == MODES
    by_threads = {
        frozenset(threads_of(t, flywheel["export"])): t["source"] for t in failures.values()
    }
    # a silent failure with no feedback, a bare thumbs-down and a note: one locked-account mode
    locked = by_threads[frozenset({"pw-jdoe", "pw-asmith", "pw-bwong"})]
    assert locked["signature"] == "silent | reset_password | account <username> is locked"
    printers = frozenset(f"printer-{n}" for n in range(1, 5))
    assert by_threads[printers]["signature"].startswith("error | triage | TypeError")
    # two notes worded differently on the same step
    notes = by_threads[frozenset({"vpn-sales", "mail-finance"})]
    assert notes["signature"] == "feedback | create_ticket(priority=normal)"
    assert set(FEEDBACK) <= {t for threads in by_threads for t in threads}


def test_checks_decide_without_a_model_and_never_require_a_failed_call(flywheel) -> None:
    rows = records(flywheel["export"])
    failed_calls = [
        (r["thread_id"], r["op_name"].split("/op/")[-1].split(":")[0], r["inputs"])
        for r in rows
        if r["parent_id"] and DEFAULT.of(r["output"]) is not None
    ]
    assert len(failed_calls) == 12
    generated = {"INC-3001", "INC-3002", "INC-3003", "JOB-3004"}
    for task in tasks_of(flywheel["tasks"]).values():
        checks = task["checks"]
        assert all(c.get("name") for c in checks), task["id"]
        assert all(c["hard"] is False for c in checks if c["kind"] == "llm_judge")
        assert any(c.get("hard", True) and c["kind"] != "llm_judge" for c in checks)
        assert not any(value in json.dumps(checks) for value in generated), task["id"]
        if task["source"]["kind"] != "success":
            continue
        threads = threads_of(task, flywheel["export"])
        for check in (c for c in checks if c["kind"] == "tool_called"):
            for thread, tool, arguments in failed_calls:
                if thread not in threads:
                    continue
                args = check.get("args", {})
                matches = tool == check["tool"] and all(
                    arguments.get(k) == v for k, v in args.items()
                )
                assert not matches, (task["id"], check)


def run_eval(flywheel, entry: str, store: Path) -> dict[str, str]:
    """The verdict of each task for the app's logic `entry`, played on the converted tasks."""
    agent = flywheel["folder"] / f"{entry}.yaml"
    agent.write_text(f"kind: agent\nname: {entry}\nrunner: python\nentry: {APP}:{entry}\n")
    done = run_cli(
        "run-eval",
        "--tasks",
        flywheel["tasks"],
        "--agent",
        agent,
        "--judge-model",
        f"{{id: scripted, script: {flywheel['folder'] / 'judge.yaml'}}}",
        "--no-traces",
        "--store",
        store,
        COLUMNS="200",
    )
    assert done.returncode == 0, done.stderr
    return {
        line.split("│")[1].strip(): line.split("│")[3].strip()
        for line in done.stdout.splitlines()
        if line.startswith("│ prod-")
    }


def test_the_bug_fails_every_failure_task_the_fix_passes_all_and_the_gate_agrees(
    flywheel, tmp_path: Path
) -> None:
    store = tmp_path / "results.db"
    kinds = {k: t["source"]["kind"] for k, t in tasks_of(flywheel["tasks"]).items()}
    bug = run_eval(flywheel, "respond", store)
    assert bug == {k: "fail" if kind == "failure" else "pass" for k, kind in kinds.items()}
    fix = run_eval(flywheel, "respond_fixed", store)
    assert fix == dict.fromkeys(kinds, "pass")
    import sqlite3

    with sqlite3.connect(store) as db:
        runs = dict(db.execute("SELECT variant, id FROM runs"))
    gate = tmp_path / "gate.yaml"
    gate.write_text("kind: gate\n")  # every setting at its default

    def decide(candidate: str, baseline: str) -> subprocess.CompletedProcess[str]:
        return run_cli(
            "gate", "--config", gate, "--store", store, "--candidate", runs[candidate],
            "--baseline", runs[baseline], COLUMNS="300",
        )  # fmt: skip

    shipped = decide("respond_fixed", "respond")
    assert shipped.returncode == 0, shipped.stdout + shipped.stderr
    assert "gate: PASS" in shipped.stdout
    assert "passes with an undecided soft check (not counted)" in shipped.stdout
    refused = decide("respond", "respond_fixed")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert (
        f"regression suite: {MODES} of {TASKS} regression-tagged tasks declined" in refused.stdout
    )


REWORDED = reworded_app("helpdesk_app", "summary", "Employee reports: ")


def test_a_fix_wording_its_free_text_its_own_way_passes_the_same_tasks(
    flywheel, tmp_path: Path
) -> None:
    """Ticket summaries are free text: a model words them its own way, and the replay answers
    such a call (production never made it) like production's, loosely matched."""
    recorded = {
        r["inputs"]["summary"]
        for r in records(flywheel["export"])
        if r["op_name"].split("/op/")[-1].startswith("create_ticket")
    }
    assert recorded and not any(s.startswith("Employee reports: ") for s in recorded)
    (tmp_path / "reworded.py").write_text(REWORDED)
    kinds = {k: t["source"]["kind"] for k, t in tasks_of(flywheel["tasks"]).items()}
    store = tmp_path / "results.db"
    for entry in ("respond", "respond_fixed"):
        agent = tmp_path / f"reworded-{entry}.yaml"
        agent.write_text(
            f"kind: agent\nname: reworded-{entry}\nrunner: python\n"
            f"entry: {tmp_path / 'reworded.py'}:{entry}\n"
        )
        done = run_cli(
            "run-eval", "--tasks", flywheel["tasks"], "--agent", agent,
            "--judge-model", f"{{id: scripted, script: {flywheel['folder'] / 'judge.yaml'}}}",
            "--no-traces", "--store", store, COLUMNS="200",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        verdicts = {
            line.split("│")[1].strip(): line.split("│")[3].strip()
            for line in done.stdout.splitlines()
            if line.startswith("│ prod-")
        }
        fixed = entry == "respond_fixed"
        assert verdicts == {
            k: "pass" if fixed or kind == "success" else "fail" for k, kind in kinds.items()
        }
    import sqlite3

    with sqlite3.connect(store) as db:
        transcripts = [row[0] for row in db.execute("SELECT transcript FROM episodes")]
    assert len(transcripts) == 2 * len(kinds)
    # every call the reworded agents made was answered as production answered its own
    assert not [t for t in transcripts if "production never made this call" in t]


def test_a_climb_trains_on_the_converted_tasks_and_ships_the_fix(flywheel, tmp_path: Path) -> None:
    (tmp_path / "helpdesk.yaml").write_text(
        "kind: agent\nname: helpdesk\nrunner: python\n"
        f"entry: {APP}:respond_by_prompt\n"
        "system_prompt: You are the IT helpdesk assistant of Corp.\n"
    )
    (tmp_path / "reflection.yaml").write_text(REFLECTION)
    (tmp_path / "gate.yaml").write_text("kind: gate\n")
    (tmp_path / "climb.yaml").write_text(
        yaml.safe_dump(
            {
                "kind": "climb",
                "name": "flywheel",
                "production": "helpdesk.yaml",
                "components": {"skills": ["helpdesk-policy"]},
                "reflection_model": {"id": "scripted", "script": "reflection.yaml"},
                "judge_model": {"id": "scripted", "script": str(flywheel["folder"] / "judge.yaml")},
                "tasks": {"paths": [str(flywheel["tasks"])]},
                "budget": {"episodes": 120, "candidates": 2},
                "gate": "gate.yaml",
                "out": "out",
            }
        )
    )
    done = run_cli(
        "climb", tmp_path / "climb.yaml", "--no-traces", "--store", tmp_path / "r.db", cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    split = next(line for line in done.stdout.splitlines() if " train, " in line)
    train, held = (int(n) for n in split.split(": ")[1].split(" (")[0].split()[::2][:2])
    assert train >= 5 and held >= 5 and train + held == TASKS, split
    assert "SHIPPED: the gate passes" in done.stdout
    shipped = yaml.safe_load(next((tmp_path / "out").glob("*.yaml")).read_text())
    assert "Read every tool result" in shipped["skills"]["helpdesk-policy"]

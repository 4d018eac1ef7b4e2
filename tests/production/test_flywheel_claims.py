"""The flywheel on an Anthropic-client app written by someone else: `tests/apps/claims_app.py`, a
home-insurance claims assistant recorded with the real weave and the real `anthropic` client
against the project's fake server. Its traces become tasks that are right both ways: production
fails every failure task its two bugs caused (water damage filed under `flood`; "Done! I
uploaded X" after a failed upload) and the fix passes them and every success task; no check
holds a value the server generated; no check is unpassable (the mistyped claim numbers the
agent asked about are no failure); praise with a thumbs-up is no failure; unrated sessions of
the buggy agent lock nothing in; and a fixed agent that words the free text of its calls its
own way passes the same tasks."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.testing.fake_server import FakeServer
from tests.apps.claims_app import FEEDBACK, production_model
from tests.conftest import ROOT, reworded_app, run_cli

APP = ROOT / "tests/apps/claims_app.py"
MUTE_JUDGE = "kind: script\nrules:\n  - reply: I think the agent did fine.\n"
# A fixed agent whose model words the claim's description its own way: production never made
# these calls, and the replay must still answer them.
REWORDED = reworded_app("claims_app", "description", "Customer says: ")


@pytest.fixture(scope="module")
def flywheel(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The app's sessions recorded, exported, and converted with the defaults."""
    folder = tmp_path_factory.mktemp("claims")
    store, export, tasks = folder / "traces.db", folder / "calls.jsonl", folder / "tasks"
    with FakeServer(responder=production_model).running() as model:
        served = subprocess.run(
            [sys.executable, str(APP), str(store), model.url],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert served.returncode == 0, served.stderr
    assert run_cli("traces", "export", "--trace-store", store, "--out", export).returncode == 0
    made = run_cli("traces", "to-tasks", "--trace-store", store, "--out", tasks)
    assert made.returncode == 0 and "Traceback" not in made.stderr, made.stderr
    assert made.stdout.strip().endswith(" 0 unreadable"), made.stdout + made.stderr
    again = run_cli("traces", "to-tasks", "--source", export, "--out", folder / "from-export")
    assert again.returncode == 0, again.stderr
    (folder / "judge.yaml").write_text(MUTE_JUDGE)
    (folder / "reworded.py").write_text(REWORDED)
    return {"folder": folder, "export": export, "tasks": tasks, "report": made.stderr}


def tasks_of(folder: Path) -> dict[str, dict]:
    return {p.stem: yaml.safe_load(p.read_text()) for p in sorted(folder.glob("*.yaml"))}


def records(export: Path) -> list[dict]:
    return [json.loads(line) for line in export.read_text().splitlines()]


def op(record: dict) -> str:
    return record["op_name"].split("/op/")[-1].split(":")[0]


def threads_of(task: dict, export: Path) -> set[str]:
    traces = set(task["source"]["trace_ids"])
    return {r["thread_id"] for r in records(export) if r["trace_id"] in traces}


def test_both_sources_give_the_same_tasks(flywheel) -> None:
    assert tasks_of(flywheel["tasks"]) == tasks_of(flywheel["folder"] / "from-export")


def test_each_failure_is_one_task_that_checks_it(flywheel) -> None:
    tasks = tasks_of(flywheel["tasks"])
    failures = {
        frozenset(threads_of(t, flywheel["export"])): t
        for t in tasks.values()
        if t["source"]["kind"] == "failure"
    }
    rated_water = {s for s in FEEDBACK if s.startswith("water-") and s != "water-wall-upload"}
    coverage = failures[frozenset(rated_water)]  # one step, whatever else its turns did
    assert coverage["source"]["signature"] == "feedback | file_claim(coverage=flood)"
    hard = [c for c in coverage["checks"] if c.get("hard", True)]
    assert [(c["kind"], c["tool"], c["args"]["coverage"]) for c in hard] == [
        ("tool_called", "file_claim", "water_damage")
    ]
    [uploads] = [t for t in failures.values() if t["source"]["signature"].startswith("silent")]
    assert {"kind": "no_false_success", "tool": "upload_document"}.items() <= (
        uploads["checks"][0].items()
    )
    assert len(failures) == 2


def test_no_check_asserts_a_generated_value_or_cannot_pass(flywheel) -> None:
    rows = records(flywheel["export"])
    generated = {r["output"]["claim_number"] for r in rows if op(r) == "file_claim"}
    generated |= {
        r["output"]["document_id"]
        for r in rows
        if op(r) == "upload_document" and r["output"].get("document_id")
    }
    assert len(generated) > 10
    mistyped = {r["inputs"]["claim_number"] for r in rows if op(r) == "lookup_claim" and r["exception"]}  # fmt: skip
    assert len(mistyped) == 5
    for task in tasks_of(flywheel["tasks"]).values():
        text = json.dumps(task["checks"])
        assert not [v for v in generated | mistyped if v in text], task["id"]
        assert "ClaimNotFound" not in text, task["id"]


def test_only_sessions_of_known_quality_are_success_tasks(flywheel) -> None:
    tasks = tasks_of(flywheel["tasks"])
    successes = {
        thread: task
        for task in tasks.values()
        if task["source"]["kind"] == "success"
        for thread in threads_of(task, flywheel["export"])
    }
    praised = {"fire-kitchen", "theft-shed-upload", "status-paid"}  # a 👍 and a note of praise
    assert praised <= set(successes)
    assert all("rated-positive" in successes[s]["tags"] for s in praised)
    # unrated sessions of the buggy agent (water filed under flood) and an abandoned one
    assert not {"water-dishwasher", "water-fridge", "water-aquarium", "status-abandon"} & set(
        successes
    )
    for task in successes.values():
        basis = task["source"]["reasons"]
        assert basis in (
            [f"rated positive ({task['source']['count']} of {task['source']['count']} session(s))"],
            ["no failure signal and a completed outcome (unrated)"],
        ), basis
    assert "session(s) of unknown quality made no success task" in flywheel["report"]


def run_eval(flywheel, entry: str, store: Path) -> dict[str, str]:
    name = "-".join(entry.replace(".py", "").split("/")[-1].split(":"))
    agent = flywheel["folder"] / f"{name}.yaml"
    agent.write_text(f"kind: agent\nname: {name}\nrunner: python\nentry: {entry}\n")
    done = run_cli(
        "run-eval", "--tasks", flywheel["tasks"], "--agent", agent,
        "--judge-model", f"{{id: scripted, script: {flywheel['folder'] / 'judge.yaml'}}}",
        "--no-traces", "--store", store, COLUMNS="200",
    )  # fmt: skip
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
    assert run_eval(flywheel, f"{APP}:respond", store) == {
        k: "fail" if kind == "failure" else "pass" for k, kind in kinds.items()
    }
    assert run_eval(flywheel, f"{APP}:respond_fixed", store) == dict.fromkeys(kinds, "pass")
    with sqlite3.connect(store) as db:
        runs = {variant.rsplit("-", 1)[-1]: id_ for variant, id_ in db.execute("SELECT variant, id FROM runs")}  # fmt: skip
    gate = tmp_path / "gate.yaml"
    gate.write_text("kind: gate\n")  # every setting at its default

    def decide(candidate: str, baseline: str) -> subprocess.CompletedProcess[str]:
        return run_cli(
            "gate", "--config", gate, "--store", store, "--candidate", runs[candidate],
            "--baseline", runs[baseline], COLUMNS="300",
        )  # fmt: skip

    shipped = decide("respond_fixed", "respond")
    assert shipped.returncode == 0 and "gate: PASS" in shipped.stdout, shipped.stdout
    refused = decide("respond", "respond_fixed")
    assert refused.returncode == 1 and "gate: FAIL" in refused.stdout, refused.stdout


def test_a_fix_wording_its_free_text_its_own_way_passes_the_same_tasks(
    flywheel, tmp_path: Path
) -> None:
    store = tmp_path / "results.db"
    kinds = {k: t["source"]["kind"] for k, t in tasks_of(flywheel["tasks"]).items()}
    reworded = flywheel["folder"] / "reworded.py"
    recorded = {
        r["inputs"]["description"] for r in records(flywheel["export"]) if op(r) == "file_claim"
    }
    assert not any(d.startswith("Customer says: ") for d in recorded)  # never made in production
    assert run_eval(flywheel, f"{reworded}:respond_fixed", store) == dict.fromkeys(kinds, "pass")
    assert run_eval(flywheel, f"{reworded}:respond", store) == {
        k: "fail" if kind == "failure" else "pass" for k, kind in kinds.items()
    }
    with sqlite3.connect(store) as db:
        transcripts = [row[0] for row in db.execute("SELECT transcript FROM episodes")]
    assert len(transcripts) == 2 * len(kinds)
    # every call the reworded agents made was answered as production answered its own
    assert not [t for t in transcripts if "production never made this call" in t]

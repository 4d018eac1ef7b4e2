"""No implicit weak judge: tasks with llm_judge checks run only with a judge named (on the
check, by `--judge-model`, in a DAG or climb, or in the project file), else the command stops
before it plays; and a local generation that timed out does not keep the process alive."""

from __future__ import annotations

import asyncio
import re
import shutil
import time
from pathlib import Path

import pytest
import yaml

from harness.project import ProjectError, find_project
from tests.conftest import JUDGE, ROOT, SCRIPTED, run_cli, run_harness

JUDGE_SCRIPT = ROOT / "agents" / "scripts" / "judge.yaml"
SUPPORT_SCRIPT = ROOT / "agents" / "scripts" / "support.yaml"
ABSOLUTE_SCRIPTED = f"agent.model={{id: scripted, script: {SUPPORT_SCRIPT}}}"
# what the embedded model answers at length (minutes on a CPU) rather than briefly
LONG_ANSWER = "Write the numbers from 1 to 2000, one per line, with nothing else."
needs_local = pytest.mark.local_model  # opt-in: README's local-model command (`-m local_model`)


def judged_support_tasks() -> list[str]:
    """Ids of the bundled support tasks with an llm_judge check that names no model."""
    ids = []
    for path in sorted((ROOT / "tasks" / "support").glob("*.yaml")):
        task = yaml.safe_load(path.read_text())
        if any(c["kind"] == "llm_judge" and "model" not in c for c in task["checks"]):
            ids.append(task["id"])
    return ids


def test_run_eval_without_a_judge_stops_before_playing(tmp_path: Path) -> None:
    store, traces = tmp_path / "results.db", tmp_path / "traces.db"
    done = run_cli(
        "run-eval",
        "--tasks",
        "tasks/support",
        "--agent",
        "agents/support-baseline.yaml",
        "--set",
        SCRIPTED,
        "--store",
        store,
        "--traces",
        traces,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    ids = judged_support_tasks()
    shown = ", ".join(ids[:3]) + (", ..." if len(ids) > 3 else "")
    assert done.stderr.splitlines() == [
        f"tasks/support: {len(ids)} tasks have llm_judge checks ({shown}) and no judge model "
        "is set: pass --judge-model, set judge_model in harness.yaml, or give the check a model"
    ]
    assert done.stdout == ""  # not even "pipeline ... started"
    assert not store.exists() and not traces.exists(), "nothing is stored"


def test_a_bundled_dag_without_a_judge_says_so_at_its_grade_node(tmp_path: Path) -> None:
    dag = yaml.safe_load((ROOT / "dags" / "nightly.yaml").read_text())
    del dag["nodes"]["grade"]["with"]
    (tmp_path / "nightly.yaml").write_text(yaml.safe_dump(dag))
    done = run_cli("run-eval", tmp_path / "nightly.yaml", "--store", tmp_path / "r.db")
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("tasks/support: ") and "no judge model is set" in line
    assert not (tmp_path / "r.db").exists()


def test_the_project_files_judge_model_is_the_default(tmp_path: Path) -> None:
    shutil.copy(JUDGE_SCRIPT, tmp_path / "judge.yaml")
    # the script is found from the project file, wherever the command runs below it
    (tmp_path / "harness.yaml").write_text("judge_model: {id: scripted, script: judge.yaml}\n")
    (tmp_path / "work").mkdir()
    done = run_cli(
        "run-eval",
        "--tasks",
        ROOT / "tasks" / "support",
        "--ids",
        "refund-outside-window",
        "--agent",
        ROOT / "agents" / "support-careful.yaml",
        "--set",
        ABSOLUTE_SCRIPTED,
        "--store",
        tmp_path / "r.db",
        "--no-traces",
        cwd=tmp_path / "work",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "judge: 1 model calls" in done.stdout
    assert "pass rate 100.0% (1/1" in done.stdout


def test_a_check_that_names_its_judge_needs_no_other(tmp_path: Path) -> None:
    task = yaml.safe_load((ROOT / "tasks" / "support" / "refund-outside-window.yaml").read_text())
    task["start"]["state_file"] = str(ROOT / "tasks" / "support" / "data" / "desk.json")
    [judged] = [c for c in task["checks"] if c["kind"] == "llm_judge"]
    judged["model"] = {"id": "scripted", "script": str(JUDGE_SCRIPT)}
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "refund.yaml").write_text(yaml.safe_dump(task))
    done = run_cli(
        "run-eval",
        "--tasks",
        tmp_path / "tasks",
        "--personas",
        ROOT / "personas",
        "--agent",
        "agents/support-careful.yaml",
        "--set",
        SCRIPTED,
        "--store",
        tmp_path / "r.db",
        "--no-traces",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "judge: 1 model calls" in done.stdout


def test_compare_without_a_judge_does_no_relative_judging(tmp_path: Path) -> None:
    common = (
        "compare",
        "--a",
        "agents/support-baseline.yaml",
        "--b",
        "agents/support-careful.yaml",
        "--tasks",
        "tasks/support",
        "--ids",
        "order-status",  # no llm_judge check: the runs need no judge
        "--set",
        SCRIPTED,
        "--store",
        tmp_path / "r.db",
        "--no-traces",
    )
    note = (
        "compare: no judge model, so the relative judge was not run (pass --judge-model or set "
        "judge_model in harness.yaml)"
    )
    done = run_cli(*common)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr.splitlines()[-1] == note  # after "pipeline ... started"
    assert done.stderr.count("relative judge") == 1 and "relative judge:" not in done.stdout
    quiet = run_cli(*common, "--no-relative")
    assert quiet.returncode == 0 and "relative judge" not in quiet.stderr


def test_a_climb_without_a_judge_stops_before_its_search(tmp_path: Path) -> None:
    for folder in ("tasks", "personas", "agents", "ci", "climbs"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    climb = tmp_path / "climbs" / "refund-window.yaml"
    config = yaml.safe_load(climb.read_text())
    del config["judge_model"]
    climb.write_text(yaml.safe_dump(config))
    done = run_cli("climb", "climbs/refund-window.yaml", "--no-traces", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("climbs/refund-window.yaml:"), line
    assert "judge_model: " in line and "llm_judge checks (" in line
    assert line.endswith("set judge_model here or in harness.yaml, or give the check a model")
    assert not (tmp_path / ".harness" / "results.db").exists()


def test_a_bad_project_judge_model_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "harness.yaml").write_text("judge_model: [openai/gpt-4.1-mini]\n")
    with pytest.raises(ProjectError, match=r"harness\.yaml: judge_model: expected a model id"):
        find_project(tmp_path)
    (tmp_path / "harness.yaml").write_text("judge_model: openai/gpt-4.1-mini\n")
    assert find_project(tmp_path).judge_model == "openai/gpt-4.1-mini"


@needs_local
def test_a_timed_out_local_generation_stops_with_its_call() -> None:
    """The call gives up at its timeout, and so does the generation (at its next token): the
    event loop ends at once instead of waiting minutes for text nobody reads, and the model is
    free for the next call."""
    from harness.models import CallPolicy, CompletionParams, ModelError, ModelRuntime
    from harness.models.local import load, locate
    from harness.transcript import Message

    _, lock = load(*locate("smollm2"))  # loaded first: the timeout is the generation's
    runtime = ModelRuntime(policy=CallPolicy(timeout_s=1.0, max_retries=0))
    model = runtime.model("local/smollm2", "agent")
    ask = [Message(role="user", content=LONG_ANSWER)]
    started = time.monotonic()
    with pytest.raises(ModelError, match="no reply within 1s"):
        asyncio.run(model.complete(ask, [], CompletionParams(max_tokens=3000, temperature=0)))
    assert time.monotonic() - started < 10  # the whole generation takes minutes on a CPU
    assert lock.acquire(timeout=5), "the cancelled generation still holds the model"
    lock.release()


@needs_local
def test_run_eval_exits_soon_after_a_local_generation_times_out(tmp_path: Path) -> None:
    # shorter than the model takes to read the support prompt and its tools, let alone answer,
    # however idle the machine: the generation is always cut off
    timeout = 0.3
    started = time.monotonic()
    done = run_harness(  # the process must end soon: a real one
        "run-eval",
        "--tasks",
        "tasks/support/impatient-gives-up.yaml",  # a scripted user: only the agent is local
        "--agent",
        "agents/support-baseline.yaml",  # local/smollm2
        "--set",
        "agent.parameters.max_tokens=3000",
        "--set",
        f"agent.system_prompt={LONG_ANSWER}",
        "--timeout",
        str(timeout),
        "--retries",
        "0",
        "--store",
        tmp_path / "r.db",
        "--no-traces",
        "--no-cache",
        COLUMNS="300",  # the reason names the provider first: room for all of it
    )
    elapsed = time.monotonic() - started
    assert f"no reply within {timeout}s" in done.stdout, done.stdout + done.stderr
    # start-up and the model's load, not the generation's minutes
    assert elapsed < timeout + 20, f"the command took {elapsed:.0f}s"


def test_regrading_needs_a_judge_once_a_task_gains_a_judge_check(tmp_path: Path) -> None:
    task = yaml.safe_load((ROOT / "tasks" / "support" / "order-status.yaml").read_text())
    task["start"]["state_file"] = str(ROOT / "tasks" / "support" / "data" / "desk.json")
    task_file = tmp_path / "tasks" / "status.yaml"
    task_file.parent.mkdir()
    task_file.write_text(yaml.safe_dump(task))
    store = tmp_path / "r.db"
    played = run_cli(
        "run-eval",
        "--tasks",
        task_file.parent,
        "--personas",
        ROOT / "personas",
        "--agent",
        "agents/support-baseline.yaml",
        "--set",
        SCRIPTED,
        "--store",
        store,
        "--no-traces",
    )
    assert played.returncode == 0, played.stdout + played.stderr
    [run_id] = re.findall(r"^Run (\S+)", played.stdout, re.MULTILINE)
    regraded = run_cli("grade", run_id, "--store", store)
    assert regraded.returncode == 0, regraded.stdout + regraded.stderr
    assert "(no judge);" in regraded.stdout
    task["checks"].append({"kind": "llm_judge", "criterion": "The agent is polite."})
    task_file.write_text(yaml.safe_dump(task))
    refused = run_cli("grade", run_id, "--store", store)
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        f"{task_file.parent}: 1 task has llm_judge checks ({task['id']}) and no judge model is "
        "set: pass --judge-model, set judge_model in harness.yaml, or give the check a model"
    ]
    judged = run_cli("grade", run_id, "--store", store, "--judge-model", JUDGE)
    assert judged.returncode == 0, judged.stdout + judged.stderr

"""The results store on both backends, SQLite (a file) and PostgreSQL (a throwaway cluster,
tests/helpers/postgres.py): every method answers the same, run-eval, the gate, `runs`, `export`, `history`
and `baseline publish` work end to end on either, runners writing at once lose nothing, a
running pipeline is held, and a bad URL or an unreachable server is one line (exit 2 or 3)
with the password masked. Real servers; real processes where several write at once (the agents
note their replies, tests/data/logged_agent.py, so the episodes played are counted), the commands
in this process elsewhere."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.grading.result import CheckResult, Verdict
from harness.store import EvaluationInfo, Store
from harness.store.schema import SCHEMA_VERSION
from harness.transcript import EndReason, Message, Transcript, Usage
from tests.conftest import JUDGE, ROOT, SCRIPTED, run_cli, run_harness
from tests.helpers.postgres import Cluster, cluster, server_bin

BACKENDS = ["sqlite", "postgresql"]
PASSWORD = "pw-Zq81s3cret"  # trust authentication accepts any: it must never be printed
TASKS = 4  # tasks of tests/data/shared-store.yaml
CARD_LIKE = "4111111111111111"  # 16 hex digits that are a Visa number (Luhn and prefix)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Cluster]:
    pytest.importorskip("psycopg", reason="the postgres extra: pip install -e '.[postgres]'")
    if server_bin() is None:
        pytest.skip("no PostgreSQL server (initdb, pg_ctl): apt-get install postgresql")
    with cluster() as running:
        yield running


def new_store(backend: str, folder: Path, request: pytest.FixtureRequest) -> str:
    """An empty store of a backend: a file path, or a new database's URL with a password."""
    if backend == "sqlite":
        return str(folder / "results.db")
    url = request.getfixturevalue("postgres").database()
    return url.replace("postgresql://harness@", f"postgresql://harness:{PASSWORD}@")


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return new_store(request.param, tmp_path, request)


def query(target: str, sql: str) -> list[tuple[Any, ...]]:
    """Rows of a query, read with the backend's own driver (not the harness)."""
    if target.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(target) as db:
            return [tuple(row) for row in db.execute(sql).fetchall()]
    with sqlite3.connect(target) as db:
        return db.execute(sql).fetchall()


def start(*args: str | Path, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "harness", *map(str, args)],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200", **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# ---------------------------------------------------------------- every method, both backends


def transcript(task_id: str, trial: int, text: str = "héllo ✓") -> Transcript:
    return Transcript(
        task_id=task_id,
        variant="base",
        variant_hash="h1",
        trial=trial,
        messages=[Message(role="user", content=text)],
        usage=Usage(calls=2, input_tokens=10, output_tokens=5, cost_usd=0.000123456789),
        turns=1,
        end_reason=EndReason.USER_STOP,
        duration_s=1.25,
    )


def verdict(task_id: str, trial: int, passed: bool, sandbox: str | None = None) -> Verdict:
    outcome = "pass" if passed else "fail"
    check = CheckResult(name="c", kind="python", outcome=outcome, sandbox=sandbox)
    return Verdict(
        task_id=task_id,
        trial=trial,
        outcome="pass" if passed else "fail",
        score=0.123456789012345 if passed else 0.0,
        checks=[check],
    )


def exercise(store: Store) -> dict[str, Any]:
    """Call every method of the store and note what each answered (ids and times replaced by
    names, so that two stores can be compared)."""
    seen: dict[str, Any] = {}
    secret_config = {"openai": "sk-" + "x" * 24, "db": f"postgresql://u:{PASSWORD}@h/d"}
    pipeline = store.new_pipeline("nightly", secret_config, "dag-test")
    store.new_pipeline("nightly", secret_config, pipeline)  # again: running again, kept
    store.finish_pipeline(pipeline, "done", {"simulate": "ran"})
    seen["pipeline"] = store.pipeline(pipeline)
    seen["pipelines"] = store.pipelines()
    store.put_node_output("key-1", "simulate", {"n": "first"}, pipeline)
    # A task hash of 16 decimal digits passes for a card number: the digests the harness made
    # are stored as they are, the rest is redacted.
    output = {"task_hashes": {"t1": CARD_LIKE}, "source": secret_config}
    store.put_node_output("key-1", "load_tasks", output, pipeline)
    seen["node_output"] = [store.node_output("key-1"), store.node_output("none")]

    config = {"trials": 2, "suite": {"t1": CARD_LIKE}, "note": f"card {CARD_LIKE}"}
    a = store.new_run("base", "h1", config, "node-a", pipeline)
    seen["claim_same"] = store.claim_run("base", "h1", {}, "node-a", pipeline).id == a
    b = store.claim_run("careful", "h2", {"trials": 1}, "node-b", pipeline).id
    store.finish_run(a)
    store.update_run_config(a, {"judge": "scripted"})
    store.update_run_config(a, {"grader": 2})
    names = {a: "RUN_A", b: "RUN_B", pipeline: "PIPELINE"}
    seen["run"] = [store.run(a), store.run(b), store.run("none")]
    seen["run_for_key"] = [store.run_for_key("node-b"), store.run_for_key("none")]
    # Runs started within one second come in either order (random ids), on both backends.
    seen["runs"] = [sorted(names[r.id] for r in store.runs(p)) for p in (None, pipeline, "dag-n")]

    # 2 x 130 episodes: more than a page (200), so that paging is exercised.
    for n in range(130):
        for trial in (0, 1):
            store.add_episode(a, transcript(f"t{n:03d}", trial), f"trace-{n}", f"call-{n}")
    store.add_episode(a, transcript("t000", 0, "a second take"), "other", "other")  # kept first
    for task_id in ("t000", "b-task", "B_task", "a_task", "Z", "é", "a-task"):  # byte order
        store.add_episode(b, transcript(task_id, 0), None, None)
    seen["has_episode"] = [store.has_episode(a, "t129", 1), store.has_episode(a, "t130", 0)]
    seen["episode_keys"] = sorted(store.episode_keys(b)), len(store.episode_keys(a))
    for n in range(130):
        for trial in (0, 1):
            store.add_verdict(a, verdict(f"t{n:03d}", trial, n % 3 != 0, "bwrap"), "g1")
    store.add_verdict(a, verdict("t000", 0, True, "subprocess"), "g1")  # graded twice: first kept
    store.add_verdict(a, verdict("t001", 1, False, "subprocess"), "g2")  # a re-grade: newest
    seen["graded_keys"] = len(store.graded_keys(a, "g1")), sorted(store.graded_keys(a, "g2"))
    seen["grading_counts"] = store.grading_counts(a, "g1"), store.grading_counts(a, "none")
    seen["unsandboxed"] = store.unsandboxed_verdicts(a)
    rows = list(store.episode_rows(a))
    seen["episode_rows"] = len(rows), rows[0], rows[3], rows[-1]
    latest = list(store.latest_verdicts(a))
    seen["latest_verdicts"] = len(latest), latest[2], latest[3]
    streamed = list(store.transcripts(a))
    seen["transcripts"] = len(streamed), streamed[0], streamed[-1]
    seen["episode_rows_b"] = list(store.episode_rows(b))

    store.set_baseline(a, "suite:x")
    store.set_baseline(b, "suite:y")
    store.set_baseline(a, "suite:x")  # set again: now the most recent
    seen["baselines"] = store.baselines(), store.baseline("suite:y"), store.baseline("none")
    store.add_gate_result(b, a, "careful", True, 0.123456789012345, ["a reason"])
    store.add_gate_result(b, None, "careful", False, 0.5, [])
    seen["gate_history"] = store.gate_history()

    store.start_climb("climb-1", "climb", "base", {"budget": 3})
    store.start_climb("climb-1", "climb", "base", {"budget": 3})  # resumed
    store.add_candidate("climb-1", "production", None, {}, "")
    store.add_candidate("climb-1", "c1", "production", {"prompt": "be brief"}, "-a\n+b")
    store.add_candidate("climb-1", "c1", "c0", {}, "")  # proposed again: keeps its parent
    store.add_candidate("climb-1", "c2", "c1", {"prompt": "be kind"}, "-b\n+c")
    store.set_candidate_status("climb-1", "c1", "kept", "better")
    for candidate, scores in (("c1", {"t1": 1.0, "t2": 0.25}), ("c2", {"t1": 0.5})):
        evaluation = EvaluationInfo(candidate, "search", a, scores, 0.000123456789, 2, "T")
        store.add_climb_evaluation("climb-1", evaluation)
    store.finish_climb("climb-1", "done", {"accepted": True})
    seen["climb"] = store.climb("climb-1"), store.climb("none"), store.climbs()
    seen["climb_candidates"] = store.climb_candidates("climb-1")
    seen["climb_evaluations"] = store.climb_evaluations("climb-1")
    return normalised(seen, names)


TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00")


def normalised(value: Any, names: dict[str, str]) -> Any:
    """Dataclasses and models as plain data; ids as names, times as 'TIME'."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    elif hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    if isinstance(value, dict):
        return {key: normalised(item, names) for key, item in value.items()}
    if isinstance(value, list | tuple | set):
        return [normalised(item, names) for item in value]
    if isinstance(value, str):
        return TIME.sub("TIME", names.get(value, value))
    return value


def test_every_store_method_answers_the_same_on_both_backends(
    tmp_path: Path, postgres: Cluster, request: pytest.FixtureRequest
) -> None:
    answers = {}
    for backend in BACKENDS:
        store = Store(new_store(backend, tmp_path, request))
        try:
            answers[backend] = exercise(store)
        finally:
            store.close()
    sqlite_answers, postgres_answers = answers["sqlite"], answers["postgresql"]
    for method in sqlite_answers:
        assert postgres_answers[method] == sqlite_answers[method], method
    seen = sqlite_answers
    # What the answers are, so that agreeing is not agreeing on nothing.
    assert seen["pipeline"]["status"] == "done" and seen["pipeline"]["nodes"] == {"simulate": "ran"}
    assert PASSWORD not in json.dumps(seen) and "sk-xxxx" not in json.dumps(seen)
    assert seen["node_output"][1] is None
    assert json.loads(seen["node_output"][0]) == {
        "task_hashes": {"t1": CARD_LIKE},
        "source": {"openai": "[REDACTED]", "db": "postgresql://u:[REDACTED]@h/d"},
    }
    assert seen["claim_same"] is True
    assert seen["run"][0]["config"] == {
        "trials": 2,
        "suite": {"t1": CARD_LIKE},
        "note": "card [PII:card]",
        "judge": "scripted",
        "grader": 2,
    }
    assert seen["run"][0]["status"] == "done" and seen["run"][2] is None
    assert seen["runs"] == [["RUN_A", "RUN_B"], ["RUN_A", "RUN_B"], []]
    assert seen["has_episode"] == [True, False]
    order = ["B_task", "Z", "a-task", "a_task", "b-task", "t000", "é"]  # as SQLite sorts
    assert seen["episode_keys"] == [[[task_id, 0] for task_id in order], 260]
    assert [row["task_id"] for row in seen["episode_rows_b"]] == order
    assert seen["graded_keys"] == [260, [["t001", 1]]]
    assert seen["grading_counts"] == [{"pass": 172, "fail": 88}, {}]
    assert seen["unsandboxed"] == 1
    count, first, fourth, last = seen["episode_rows"]
    assert count == 260 and first["task_id"] == "t000" and last["task_id"] == "t129"
    assert first["usage"]["cost_usd"] == 0.000123456789  # a double, not a 24-bit float
    assert fourth["verdict"]["outcome"] == "fail" and fourth["task_id"] == "t001"  # g2's
    count, third, fourth = seen["latest_verdicts"]  # t001 trial 0 (g1), trial 1 (g2)
    assert count == 260 and third["score"] == 0.123456789012345 and fourth["outcome"] == "fail"
    count, first, last = seen["transcripts"]
    assert count == 260 and first[0]["messages"][0]["content"] == "héllo ✓"
    assert first[1:] == ["trace-0", "call-0"] and last[1:] == ["trace-129", "call-129"]
    assert seen["baselines"] == [
        [["suite:x", "RUN_A", "TIME"], ["suite:y", "RUN_B", "TIME"]],
        "RUN_B",
        None,
    ]
    assert [row["pass_rate"] for row in seen["gate_history"]] == [0.123456789012345, 0.5]
    assert seen["gate_history"][0]["passed"] == 1
    climb, missing, climbs = seen["climb"]
    assert climb["decision"] == {"accepted": True} and missing is None and climbs == ["climb-1"]
    assert [(c["candidate"], c["parent"], c["status"]) for c in seen["climb_candidates"]] == [
        ("production", None, "proposed"),
        ("c1", "production", "kept"),
        ("c2", "c1", "proposed"),
    ]
    assert [e["scores"] for e in seen["climb_evaluations"]] == [
        {"t1": 1.0, "t2": 0.25},
        {"t1": 0.5},
    ]


# ---------------------------------------------------------------- the commands, end to end


@pytest.fixture(scope="module", params=BACKENDS)
def gated(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """A store of one backend holding a baseline run, a candidate run and one gate decision,
    made by the commands as CI would run them."""
    folder = tmp_path_factory.mktemp(request.param)
    store = new_store(request.param, folder, request)
    common = ["--set", SCRIPTED, "--judge-model", JUDGE, "--limit", str(TASKS)]
    common += ["--no-traces", "--no-cache", "--json"]
    runs, outputs = {}, []
    for variant in ("support-baseline", "support-careful"):
        # The first from $HARNESS_STORE, the second from --store: one store either way.
        where = {"HARNESS_STORE": store} if variant == "support-baseline" else {}
        args = ["run-eval", "--tasks", "tasks/support", "--agent", f"agents/{variant}.yaml"]
        done = run_cli(*args, *common, *([] if where else ["--store", store]), **where)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr
        summary = json.loads(done.stdout)
        runs[variant] = summary["runs"][0]["run_id"]
        outputs.append(done.stdout + done.stderr)
        if variant == "support-baseline":
            done = run_cli("baseline", "set", runs[variant], "--store", store)
            assert done.returncode == 0, done.stderr
            outputs.append(done.stdout + done.stderr)
    files = ["--junit", folder / "junit.xml", "--markdown", folder / "gate.md"]
    gate = run_cli("gate", "--config", "ci/gate.yaml", *files, HARNESS_STORE=store)
    outputs.append(gate.stdout + gate.stderr)
    return {
        "backend": request.param,
        "store": store,
        "folder": folder,
        "baseline": runs["support-baseline"],
        "candidate": runs["support-careful"],
        "pipeline": summary["pipeline_id"],
        "gate": gate,
        "outputs": outputs,
    }


def test_the_gate_reads_its_baseline_from_the_store(gated: dict[str, Any]) -> None:
    gate = gated["gate"]
    assert gate.returncode in (0, 1), gate.stdout + gate.stderr
    assert (
        f"candidate {gated['candidate']} (support-careful) against baseline {gated['baseline']}"
        in gate.stdout
    )
    [(baselines,)] = query(gated["store"], "SELECT COUNT(*) FROM baselines")
    [(decisions,)] = query(gated["store"], "SELECT COUNT(*) FROM gate_history")
    assert (baselines, decisions) == (1, 1)
    assert all(PASSWORD not in output for output in gated["outputs"])


def test_runs_export_and_history_read_the_store(gated: dict[str, Any]) -> None:
    store = gated["store"]
    listed = run_cli("runs", "list", "--store", store)
    assert listed.returncode == 0, listed.stderr
    assert gated["pipeline"] in listed.stdout and PASSWORD not in listed.stdout
    shown = run_cli("runs", "show", gated["baseline"], "--results", "--store", store)
    assert shown.returncode == 0, shown.stderr
    assert "support-baseline" in shown.stdout and "pass rate" in shown.stdout
    exported = run_cli("export", gated["pipeline"], "--format", "jsonl", HARNESS_STORE=store)
    assert exported.returncode == 0, exported.stderr
    rows = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [(row["run_id"], row["variant"]) for row in rows] == [
        (gated["candidate"], "support-careful")
    ] * TASKS
    history = run_cli("history", "--store", store)
    assert history.returncode == 0 and "support-careful" in history.stdout, history.stderr
    shown = run_cli("baseline", "show", "--store", store)
    assert shown.returncode == 0 and gated["baseline"] in shown.stdout, shown.stderr


def test_baseline_publish_writes_a_wandb_artifact_offline(gated: dict[str, Any]) -> None:
    folder = gated["folder"] / "wandb-publish"
    done = run_harness(  # W&B's own process, as a user's
        "baseline", "publish", "--dir", folder, "--store", gated["store"], WANDB_MODE="offline"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "published gate-baseline: 1 baseline(s), 1 gate decision(s)" in done.stdout
    [run_folder] = (folder / "wandb").glob("offline-run-*")
    baselines = json.loads((run_folder / "files/gate-baseline/baselines.json").read_text())
    history = json.loads((run_folder / "files/gate-baseline/gate_history.json").read_text())
    assert [(row["run_id"], row["variant"], row["graded"]) for row in baselines] == [
        (gated["baseline"], "support-baseline", TASKS)
    ]
    assert [(row["candidate_run"], row["baseline_run"]) for row in history] == [
        (gated["candidate"], gated["baseline"])
    ]
    log = next(run_folder.glob("run-*.wandb")).read_bytes()
    assert b"gate-baseline" in log and b"gate-baseline/baselines.json" in log  # the artifact
    assert PASSWORD.encode() not in log


def test_baseline_publish_without_a_baseline_is_one_line(store_url: str, tmp_path: Path) -> None:
    Store(store_url).close()
    done = run_cli("baseline", "publish", "--dir", tmp_path, "--store", store_url)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        f"{masked(store_url)}: no baseline (harness baseline set RUN)"
    ]
    assert not (tmp_path / "wandb").exists()


def masked(url: str) -> str:
    return url.replace(PASSWORD, "[REDACTED]")


# ---------------------------------------------------------------- many runners, one store


def test_runners_writing_at_once_lose_nothing(store_url: str, tmp_path: Path) -> None:
    """Three run-evals at once on a new store (all creating its tables): two of the same
    pipeline content, which share one run (its episodes played once), and a third of its own."""
    eval_ = ["run-eval", "tests/data/shared-store.yaml", "--no-traces", "--no-cache"]
    calls = tmp_path / "calls.log"
    processes = [
        start(
            *eval_,
            "--store",
            store_url,
            "--set",
            f"simulate.concurrency={concurrency}",
            AGENT_CALLS_LOG=str(calls),
        )
        for concurrency in (1, 1, 2)
    ]
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, out[-2000:] + err
        assert "Traceback" not in err and PASSWORD not in out + err
    runs = query(store_url, "SELECT id FROM runs ORDER BY id")
    assert len(runs) == 2
    for (run_id,) in runs:
        [(episodes,)] = query(store_url, f"SELECT COUNT(*) FROM episodes WHERE run_id = '{run_id}'")
        assert episodes == TASKS, run_id
    [(verdicts,)] = query(store_url, "SELECT COUNT(DISTINCT run_id || task_id) FROM verdicts")
    assert verdicts == 2 * TASKS
    opened = [line.split()[1] for line in calls.read_text().splitlines()]
    assert opened.count("1") == 2 * TASKS, "each episode of the two runs played once"
    assert query(store_url, "SELECT DISTINCT status FROM pipelines") == [("done",)]


def test_a_running_pipeline_cannot_be_resumed_twice(store_url: str) -> None:
    first = start("run-eval", "tests/data/resume.yaml", "--store", store_url, "--no-traces")
    try:
        pipeline_id = first.stderr.readline().split()[1]
        second = run_cli(
            "run-eval", "--resume", pipeline_id, "--no-traces", HARNESS_STORE=store_url
        )
        assert second.returncode == 2, second.stdout + second.stderr
        assert second.stderr.splitlines() == [
            f"{masked(store_url)}: pipeline {pipeline_id} is running in another process; wait "
            "for it to end (or stop it) before resuming it"
        ]
    finally:
        first.kill()
        first.wait()


# ---------------------------------------------------------------- bad URLs, unreachable servers


@pytest.mark.parametrize(
    ("url", "code", "message"),
    [
        (
            f"postgresql://harness:{PASSWORD}@[::1/db",
            2,
            'not a PostgreSQL URL: end of string reached when looking for matching "]"',
        ),
        (
            f"postgresql://harness:{PASSWORD}@localhost:port/db",
            2,
            "not a PostgreSQL URL: port 'port' is not a number",
        ),
        (
            f"postgres://harness:{PASSWORD}@127.0.0.1:1/db?sslmode=maybe",
            2,
            'not a PostgreSQL URL: connection is bad: invalid sslmode value: "maybe"',
        ),
        (
            f"postgresql://harness:{PASSWORD}@127.0.0.1:1/db",
            3,
            "cannot connect to the results store: connection failed:",
        ),
    ],
    ids=["malformed", "port", "sslmode", "unreachable"],
)
@pytest.mark.parametrize(
    "command",
    [["runs", "list"], ["run-eval", "tests/data/shared-store.yaml", "--no-traces"]],
    ids=["runs-list", "run-eval"],
)
def test_a_bad_url_or_an_unreachable_server_is_one_line_without_the_password(
    url: str, code: int, message: str, command: list[str]
) -> None:
    done = run_cli(*command, "--store", url)
    assert done.returncode == code, done.stdout + done.stderr
    [line] = done.stderr.splitlines()
    assert message in line and masked(url) in line, line
    assert PASSWORD not in done.stdout + done.stderr


def test_a_database_the_server_does_not_have_is_exit_3(postgres: Cluster) -> None:
    url = postgres.url("no_such_database", PASSWORD)
    done = run_cli("runs", "list", "--store", url)
    assert done.returncode == 3, done.stdout + done.stderr
    [line] = done.stderr.splitlines()
    assert 'database "no_such_database" does not exist' in line and PASSWORD not in line


TABLES = "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"


@pytest.mark.parametrize(
    ("existing", "expected"),
    [
        (
            "CREATE TABLE runs (id INTEGER)",
            "not a results store: it holds tables of another kind (runs)",
        ),
        (
            "CREATE TABLE harness_schema (version INTEGER); INSERT INTO harness_schema VALUES (99)",
            f"results store of a newer harness (version 99, this one reads {SCHEMA_VERSION}); "
            "move it aside or "
            "pass another --store",
        ),
    ],
    ids=["foreign-tables", "newer-harness"],
)
def test_a_database_that_is_not_a_results_store_is_refused_untouched(
    postgres: Cluster, existing: str, expected: str
) -> None:
    import psycopg

    url = postgres.database()
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(existing)
    before = sorted(query(url, TABLES))
    done = run_cli("runs", "list", "--store", url)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [f"{url}: {expected}"]
    assert sorted(query(url, TABLES)) == before

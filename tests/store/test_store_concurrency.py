"""Many processes on one results store, as a team uses it: concurrent run-evals beside a compare
all succeed, the same pipeline started twice shares its run, `kill -9` at any point then
`--resume` loses and plays again nothing, a running pipeline cannot be resumed twice, an unusable
store is one line and exit 2, a crashed node exit 3. Real processes, real SQLite; the agents
note their replies (tests/data/logged_agent.py), so that the episodes played are counted."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import JUDGE, ROOT, run_cli, run_harness

TASKS = 4  # of tasks/support, per run (tests/data/shared-store.yaml)
LONG = [pytest.mark.slow, pytest.mark.timeout(1800)]
EVAL = ["run-eval", "tests/data/shared-store.yaml", "--no-traces", "--no-cache"]


def start(*args: str | Path, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "harness", *map(str, args)],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200", **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def query(store: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(store) as db:
        return db.execute(sql).fetchall()


def opened(calls: Path) -> dict[int, int]:
    """Episodes each process opened, by process id, from the agents' notes."""
    counts: dict[int, int] = {}
    for line in calls.read_text().splitlines() if calls.exists() else []:
        pid, opens = map(int, line.split())
        counts[pid] = counts.get(pid, 0) + opens
    return counts


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A store holding two graded runs (baseline and careful) for `compare` to read."""
    store = tmp_path_factory.mktemp("seed") / "seed.db"
    done = run_cli(
        "run-eval",
        "dags/ab-compare.yaml",
        "--store",
        store,
        "--no-traces",
        "--no-cache",
        "--set",
        f"tasks.limit={TASKS}",
        "--set",
        f"report.markdown={store.parent / 'ab.md'}",
    )
    assert done.returncode == 0, done.stderr
    (run_a,), (run_b,) = query(store, "SELECT id FROM runs ORDER BY variant")
    return store, run_a, run_b


def copy_store(source: Path, target: Path) -> None:
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)


def assert_whole(store: Path) -> None:
    """Every run complete, every episode graded in each of its run's grading passes."""
    for run_id, trials in query(store, "SELECT id, json_extract(config, '$.trials') FROM runs"):
        [(episodes,)] = query(store, f"SELECT COUNT(*) FROM episodes WHERE run_id = '{run_id}'")
        assert episodes == TASKS * trials, run_id
        for (graded,) in query(
            store, f"SELECT COUNT(*) FROM verdicts WHERE run_id = '{run_id}' GROUP BY grading"
        ):
            assert graded == episodes, run_id
    ungraded = query(
        store,
        "SELECT e.run_id, e.task_id, e.trial FROM episodes e WHERE NOT EXISTS (SELECT 1 FROM"
        " verdicts v WHERE v.run_id = e.run_id AND v.task_id = e.task_id AND v.trial = e.trial)",
    )
    assert ungraded == []
    assert query(store, "SELECT DISTINCT status FROM pipelines") == [("done",)]


@pytest.mark.parametrize("writers", [2, 4])
@pytest.mark.parametrize("repetitions", [3, pytest.param(20, marks=LONG)])
def test_concurrent_runs_and_a_compare_on_one_store_all_succeed(
    tmp_path: Path, seeded: tuple[Path, str, str], writers: int, repetitions: int
) -> None:
    source, run_a, run_b = seeded
    for repetition in range(repetitions):
        store = tmp_path / f"results-{repetition}.db"
        calls = tmp_path / f"calls-{repetition}.log"
        copy_store(source, store)
        # Pairs of identical commands (the same pipeline content twice) and distinct ones.
        processes = [
            # One trial (the seeded runs have 2); a pair shares a node key, so a run.
            start(
                *EVAL,
                "--store",
                store,
                "--set",
                f"simulate.concurrency={1 + n // 2}",
                AGENT_CALLS_LOG=str(calls),
            )
            for n in range(writers)
        ]
        # Beside them: a compare of the stored runs, and a re-grade or a gate in turns.
        files = ["--junit", tmp_path / "junit.xml", "--markdown", tmp_path / "gate.md"]
        beside = (
            ["grade", run_a, "--store", store, "--judge-model", JUDGE, "--no-cache"]
            if repetition % 2 == 0
            else ["gate", "--store", store, "--candidate", run_b, "--baseline", run_a, *files]
        )
        other = start(*beside)
        compare = start(
            "compare", run_a, run_b, "--store", store, "--judge-model", JUDGE, "--no-cache"
        )
        for process in [*processes, other, compare]:
            out, err = process.communicate(timeout=300)
            allowed = (0, 1) if beside[0] == "gate" and process is other else (0,)  # gate: "no"
            assert process.returncode in allowed, f"repetition {repetition}: {out[-2000:]}{err}"
            assert "Traceback" not in err
        assert "flipped to pass" in out, "the compare printed its comparison"
        # Identical commands shared one run; distinct ones have their own; a regrade is a new run.
        regraded = beside[0] == "grade"
        assert query(store, "SELECT COUNT(*) FROM runs") == [(2 + (writers + 1) // 2 + regraded,)]
        assert_whole(store)
        # Each episode of the new runs was played once, by one of the processes that share it.
        assert sum(opened(calls).values()) == (writers + 1) // 2 * TASKS


def test_the_same_pipeline_cannot_be_resumed_while_it_runs(tmp_path: Path) -> None:
    store = tmp_path / "results.db"
    first = start("run-eval", "tests/data/resume.yaml", "--store", store, "--no-traces")
    try:
        started = first.stderr.readline()
        pipeline_id = started.split()[1]
        second = run_cli("run-eval", "--resume", pipeline_id, "--store", store, "--no-traces")
        assert second.returncode == 2
        assert second.stderr.splitlines() == [
            f"{store}: pipeline {pipeline_id} is running in another process; wait for it to "
            "end (or stop it) before resuming it"
        ]
    finally:
        first.kill()
        first.wait()


def kill_when(process: subprocess.Popen[str], store: Path, ready: str, delay: float) -> None:
    """Kill -9 the process `delay` seconds after `ready` (a SQL count) is true."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
        if store.exists() and query(store, ready)[0][0]:
            break
    time.sleep(delay)
    process.send_signal(signal.SIGKILL)
    process.wait()


@pytest.mark.parametrize("kills", [2, pytest.param(10, marks=LONG)])
def test_kill_9_at_random_points_then_resume_loses_and_duplicates_nothing(
    tmp_path: Path, kills: int
) -> None:
    """Killed while simulating, while grading or while recording, resumed each time (and the
    resumed process killed again): the end holds exactly every episode and one verdict each,
    and each resumed process played only episodes that were not stored when it started."""
    store, chance = tmp_path / "results.db", random.Random(kills)
    calls = tmp_path / "calls.log"  # tests/data/slow_agent.py notes each reply there
    command = ["run-eval", "tests/data/resume.yaml", "--no-traces", "--no-cache"]
    process = start(*command, "--store", store, AGENT_CALLS_LOG=str(calls))
    pipeline_id = process.stderr.readline().split()[1]
    points = [
        # (what must be stored before the kill, seconds after that)
        (f"SELECT COUNT(*) >= {chance.randint(1, 40)} FROM episodes", chance.random()),
        ("SELECT COUNT(*) >= 44 FROM episodes", chance.random() * 0.5),  # grading
    ]
    points += [
        (f"SELECT COUNT(*) >= {chance.randint(0, 44)} FROM episodes", chance.random() * 2)
        for _ in range(kills - 2)
    ]
    chance.shuffle(points)
    missing = {}  # by process: episodes not stored when it started
    for ready, delay in points:
        kill_when(process, store, ready, delay)
        [(stored,)] = query(store, "SELECT COUNT(*) FROM episodes")
        # the last process, never killed, need not be slow
        fast = {"SLOW_AGENT_S": "0"} if len(missing) == len(points) - 1 else {}
        resume = ["run-eval", "--resume", pipeline_id, "--store", store, "--no-traces"]
        process = start(*resume, AGENT_CALLS_LOG=str(calls), **fast)
        missing[process.pid] = 44 - stored
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, out[-2000:] + err
    plays = opened(calls)
    assert plays.get(process.pid, 0) == missing[process.pid], "the last one played what was missing"
    for pid, count in missing.items():
        assert plays.get(pid, 0) <= count, "a resumed process played a stored episode again"
    assert query(store, "SELECT COUNT(*) FROM runs") == [(1,)]
    assert query(store, "SELECT COUNT(*) FROM episodes") == [(44,)]
    assert query(store, "SELECT COUNT(*), COUNT(DISTINCT grading) FROM verdicts") == [(44, 1)]
    assert query(store, "SELECT status FROM pipelines") == [("done",)]


@pytest.mark.parametrize("kind", ["folder", "text", "random", "unwritable"])
def test_an_unusable_store_is_one_line_and_keeps_what_it_holds(tmp_path: Path, kind: str) -> None:
    store = {
        "folder": tmp_path,
        "text": tmp_path / "notes.txt",
        "random": tmp_path / "noise.db",
        "unwritable": Path("/proc/1/results.db"),
    }[kind]
    content = {"text": b"my notes\n", "random": random.Random(1).randbytes(5000)}.get(kind)
    if content is not None:
        store.write_bytes(content)
    before = sorted(p.name for p in tmp_path.iterdir())
    for args in (
        [*EVAL, "--store", store],
        ["runs", "list", "--store", store],
        ["gate", "--store", store, "--candidate", "x", "--baseline", "y"],
    ):
        done = run_cli(*args)
        assert done.returncode == 2, done.stdout + done.stderr
        [line] = done.stderr.splitlines()
        assert line.startswith(f"{store}: "), line
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "nothing created beside it"
    if content is not None:
        assert store.read_bytes() == content


def test_a_node_that_crashes_exits_3_not_1(tmp_path: Path) -> None:
    """A harness failure (here a plug-in node kind that raises) is exit 3, and one line."""
    (tmp_path / "harness.yaml").write_text("plugins: [crash_node]\n")
    (tmp_path / "crash_node.py").write_text(
        "from harness.pipeline.nodes import NodeKind, register\n"
        "from harness.pipeline.nodes.load_tasks import LoadTasksParams\n"
        "from harness.pipeline.types import Tasks\n"
        "async def run(params, inputs, ctx):\n"
        "    raise RuntimeError('the disk caught fire')\n"
        "register(NodeKind('crash', LoadTasksParams, (), Tasks, run))\n"
    )
    (tmp_path / "dag.yaml").write_text(
        f"kind: dag\nname: crash\nnodes:\n  boom: {{uses: crash, with: {{paths: [{ROOT}/tasks/support]}}}}\n"
    )
    done = run_harness("run-eval", "dag.yaml", "--store", tmp_path / "r.db", cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "node boom failed: RuntimeError: the disk caught fire" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr

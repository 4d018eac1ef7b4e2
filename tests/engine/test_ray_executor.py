"""`--executor ray`: episodes played by the workers of a real local Ray (2 CPUs, started here)
give exactly what the local executor gives, lose nothing when a worker is killed mid-run, and
share each endpoint's call limit and retry budget across workers; a climb on Ray ships what
a local climb ships."""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.specs.load import load_script
from harness.store import Store
from harness.testing.fake_server import FakeServer, Faults
from tests.cli.test_run_eval import EXPECTED_BASELINE
from tests.conftest import JUDGE, ROOT, SCRIPTED

ray = pytest.importorskip("ray")

BASELINE = "agents/support-baseline.yaml"
TIMING = {
    "started_at": True,
    "duration_s": True,
    "usage": {"latency_s"},
    "user_usage": {"latency_s"},
}


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    """A local Ray of 2 CPUs for this module: no dashboard, no usage statistics, no network."""
    saved = dict(os.environ)
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ.setdefault("OPENAI_API_KEY", "test-not-a-real-key")  # the workers inherit it
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()
    os.environ.clear()
    os.environ.update(saved)


def run_eval(cli, store: Path, *extra: str, agent: str = BASELINE, exit_code: int = 0):
    done = cli(
        "run-eval",
        "--tasks",
        "tasks/support",
        "--agent",
        agent,
        "--store",
        store,
        "--judge-model",
        JUDGE,
        "--no-traces",
        "--concurrency",
        "4",
        *extra,
    )
    assert done.exit_code == exit_code, done.output
    return done


def episodes(store: Path) -> dict[tuple[str, int], tuple]:
    """(task, trial) -> (verdict outcome, failed checks, seed, transcript without timing)."""
    with sqlite3.connect(store) as db:
        [(run_id,)] = db.execute("SELECT id FROM runs")
    results = Store(store)
    try:
        verdicts = {(v.task_id, v.trial): v for v in results.latest_verdicts(run_id)}
        return {
            (t.task_id, t.trial): (
                verdicts[t.task_id, t.trial].outcome,
                [c.name for c in verdicts[t.task_id, t.trial].failed_checks()],
                t.seed,
                t.model_dump(exclude=TIMING),
            )
            for t, _, _ in results.transcripts(run_id)
        }
    finally:
        results.close()


def run_config(store: Path) -> dict:
    results = Store(store)
    try:
        [run] = results.runs()
        return {"variant_hash": run.variant_hash, "suite": run.config["suite"]}
    finally:
        results.close()


def test_bundled_suite_on_ray_gives_exactly_the_local_verdicts(cli, tmp_path: Path) -> None:
    local, remote = tmp_path / "local.db", tmp_path / "ray.db"
    run_eval(cli, local, "--set", SCRIPTED)
    done = run_eval(cli, remote, "--set", SCRIPTED, "--executor", "ray")
    assert "pass rate 77.3% (17/22" in done.output
    played = episodes(remote)
    assert played == episodes(local)  # same verdicts, seeds and transcripts
    assert run_config(remote) == run_config(local)  # same variant and task content hashes
    observed = {task: (outcome, failed) for (task, _), (outcome, failed, *_) in played.items()}
    assert observed == {task: (v, failed) for task, (v, _, failed) in EXPECTED_BASELINE.items()}
    # The executor is not part of what a node did: the local run's nodes are reused on Ray.
    again = run_eval(cli, local, "--set", SCRIPTED, "--executor", "ray")
    assert "simulate reused, grade reused" in again.output.replace("\n", " ")


KILLER = '''
import os, signal, sys
from pathlib import Path

sys.path.insert(0, {agents!r})
from support_bot import respond as bot

ARMED = Path(__file__).with_name("armed")
CALLS = Path(__file__).with_name("calls.log")


def respond(conversation, tools):
    """The bundled Python bot, noting each reply in `calls.log` (the process id, and 1 if the
    reply opens an episode), except that while `armed` exists the run's first reply kills its
    process (a Ray worker, with other episodes in flight) with SIGKILL: that worker finishes
    no episode, so the workers that live must play each one exactly once."""
    opens = all(message["role"] != "assistant" for message in conversation)
    with CALLS.open("a") as calls:
        calls.write(f"{{os.getpid()}} {{int(opens)}}\\n")
    try:
        ARMED.rename(ARMED.with_name("fired"))  # once, whoever comes first
    except FileNotFoundError:
        pass
    else:
        ARMED.with_name("fired").write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    return bot(conversation, tools)
'''


def opened(calls: Path) -> dict[int, int]:
    """Episodes each process opened, by process id, from the bot's notes (then cleared)."""
    counts: dict[int, int] = {}
    for line in calls.read_text().splitlines():
        pid, opens = map(int, line.split())
        counts[pid] = counts.get(pid, 0) + opens
    calls.unlink()
    return counts


def test_a_worker_killed_mid_run_loses_no_episode(cli, tmp_path: Path) -> None:
    (tmp_path / "killer.py").write_text(KILLER.format(agents=str(ROOT / "agents")))
    agent = tmp_path / "killer.yaml"
    agent.write_text(
        f"kind: agent\nname: support-killer\nextends: {ROOT / 'agents/support-python.yaml'}\n"
        "entry: killer.py:respond\n"
    )
    local, remote = tmp_path / "local.db", tmp_path / "ray.db"
    run_eval(cli, local, "--trials", "2", agent=str(agent))
    every = 2 * len(EXPECTED_BASELINE)
    assert sum(opened(tmp_path / "calls.log").values()) == every, "each played once"
    (tmp_path / "armed").touch()
    run_eval(cli, remote, "--trials", "2", "--executor", "ray", agent=str(agent))
    killed = int((tmp_path / "fired").read_text())
    assert not (tmp_path / "armed").exists()
    assert not alive(killed)  # the worker really died
    plays = opened(tmp_path / "calls.log")
    # killed at the run's first reply (its other episodes may have begun theirs at once)
    assert plays.pop(killed) >= 1
    assert sum(plays.values()) == every, "the workers that live played each episode once"
    played = episodes(remote)
    assert len(played) == every  # every episode stored
    assert played == episodes(local)


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie waiting for its parent to reap it does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    script = load_script(ROOT / "agents/scripts/support.yaml").spec
    server = FakeServer(script, latency_s=0.05, faults=Faults(retry_after_s=0.01))
    with server.running():
        yield server


def served_agent(url: str, limit: int) -> str:
    return f"agent.model={{id: openai/fake, base_url: '{url}/v1', max_concurrency: {limit}}}"


def test_an_endpoint_limit_holds_across_workers(cli, tmp_path: Path, fake_server) -> None:
    store = tmp_path / "ray.db"
    ids = "order-status,refund-by-email,cancel-processing,address-change,two-requests,out-of-scope"
    model = served_agent(fake_server.url, 2)
    # `executor: ray` of the simulate node, here set from the command line
    extra = ("--ids", ids, "--set", model, "--no-cache")  # a cache would hide calls made twice
    extra += ("--set", "simulate.executor=ray")
    run_eval(cli, store, *extra)
    # 2 workers x 4 episodes at once, and never more than the endpoint's 2 calls in flight
    assert fake_server.max_in_flight == 2
    played = episodes(store)
    assert len(played) == 6
    # every call the endpoint answered is one a stored episode made: none played twice
    assert fake_server.stats["requests"] == sum(t["usage"]["calls"] for *_, t in played.values())


def test_the_retry_budget_is_shared_by_every_worker(cli, tmp_path: Path, fake_server) -> None:
    fake_server.faults.rate_429 = 1.0  # every call is refused
    store = tmp_path / "ray.db"
    ids = "order-status,refund-by-email,cancel-processing,address-change"
    model = served_agent(fake_server.url, 1)
    run_eval(
        cli,
        store,
        "--ids",
        ids,
        "--set",
        model,
        "--no-cache",
        "--retries",
        "2",
        "--executor",
        "ray",
        exit_code=3,  # every episode lacks evidence (the agent's model): no pass rate
    )
    # one first call per episode, then the endpoint's budget of 1 slot x 2 retries in all
    # (each of 4 episodes retrying on its own would make 12 calls)
    assert fake_server.stats["requests"] == 4 + 2
    errors = [t["error"]["message"] for *_, t in episodes(store).values()]
    assert len(errors) == 4 and all("retry budget is spent" in message for message in errors)


def test_a_climb_on_ray_ships_what_a_local_climb_ships(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    played = {}
    for executor in ("local", "ray"):
        project = tmp_path / executor
        for folder in ("tasks", "personas", "agents", "ci", "climbs"):
            shutil.copytree(ROOT / folder, project / folder)
        monkeypatch.chdir(project)  # a new folder: Ray workers start there
        done = cli("climb", "climbs/refund-window.yaml", "--no-traces", "--executor", executor)
        assert done.exit_code == 0, done.output
        assert "SHIPPED: the gate passes" in done.output
        written = project / "agents/support-baseline-refund-window.yaml"
        with sqlite3.connect(project / ".harness/results.db") as db:
            runs = db.execute("SELECT variant_hash, COUNT(*) FROM runs GROUP BY variant_hash")
            played[executor] = (written.read_text().split("\n", 1)[1], sorted(runs))
    assert played["ray"] == played["local"]  # the same candidates, the same variant written


def test_the_slots_of_a_dead_worker_come_back() -> None:
    from harness.engine.ray_limits import EndpointLimits

    limits = ray.remote(EndpointLimits).remote()
    endpoint = ("openai", "http://127.0.0.1:9/v1")
    ray.get(limits.acquire.remote(endpoint, 1, "worker-1", 60))
    waiting = limits.acquire.remote(endpoint, 1, "worker-2", 60)
    assert ray.wait([waiting], timeout=0.5)[0] == []  # the one slot is held
    limits.forget.remote("worker-1")  # worker-1 died and restarted
    lease = ray.get(waiting, timeout=10)
    # a lease never given back lapses after its longest hold
    ray.get(limits.release.remote(endpoint, lease, True))
    ray.get(limits.acquire.remote(endpoint, 1, "worker-3", 0.3))
    started = time.monotonic()
    ray.get(limits.acquire.remote(endpoint, 1, "worker-4", 60), timeout=10)
    assert 0.1 < time.monotonic() - started < 5
    status = ray.get(limits.status.remote())[repr(endpoint)]
    assert status["limit"] == 1 and status["peak"] == 1
    ray.kill(limits)

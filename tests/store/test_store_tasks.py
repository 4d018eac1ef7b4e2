"""A self-describing store: each run records the tasks it played (content hash, level, tags,
spec) in the store's `tasks` table, so that `gate`, `compare`, `report`, `export` and
`runs show` work on a copy of the store file alone, in a folder with no task file, with the
figures the checkout computes from the task files. A store of an older harness (no tasks
recorded) still works from the task files; only regrading reads them otherwise. Real
commands on real stores."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.report.html import ReportPage, build_report
from harness.sim.suite import load_cases
from harness.store import Store
from harness.store.schema import SCHEMA_VERSION
from tests.conftest import JUDGE, ROOT, SCRIPTED, run_harness, scripted_eval
from tests.helpers.postgres import serving

TAG_FLOORS = {"refunds": 0.5, "regression": 0.6}


def old_style(store: Path, copy: Path) -> Path:
    """A copy of a store as an older harness left it: schema version 4, no tasks recorded."""
    shutil.copy(store, copy)
    with sqlite3.connect(copy) as db:
        db.execute("DROP TABLE IF EXISTS tasks")  # a copy that a harness opened has one
        db.execute("PRAGMA user_version = 4")
    return copy


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two runs of the support suite (the baseline set), a copy of only the store file in an
    empty folder beside a gate config with level and tag floors, and an old-style copy."""
    source = tmp_path_factory.mktemp("checkout")
    store = source / "results.db"
    runs = []
    for variant in ("support-baseline", "support-careful"):
        done = scripted_eval(store, f"agents/{variant}.yaml", "--json")
        runs.append(json.loads(done.stdout)["runs"][0]["run_id"])
    done = run_harness("baseline", "set", runs[0], "--store", store)
    assert done.returncode == 0, done.stderr
    empty = tmp_path_factory.mktemp("elsewhere")
    shutil.copy(store, empty / "results.db")
    config = yaml.safe_load((ROOT / "ci/gate.yaml").read_text())
    config = {k: v for k, v in config.items() if k not in ("junit", "markdown")}
    (empty / "gate.yaml").write_text(yaml.safe_dump({**config, "tag_floors": TAG_FLOORS}))
    return {
        "empty": empty,
        "old": old_style(store, source / "old.db"),
        "base": runs[0],
        "candidate": runs[1],
    }


def in_empty(stored: dict[str, Any], *args: str) -> Any:
    """A command on the copied store, in the folder that has nothing else."""
    done = run_harness(*args, "--store", "results.db", cwd=stored["empty"])
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    return done


def in_checkout(stored: dict[str, Any], *args: str) -> Any:
    """The same command in the checkout on the old-style store: it reads the task files."""
    done = run_harness(*args, "--store", stored["old"])
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    return done


def test_the_run_records_its_tasks(stored: dict[str, Any]) -> None:
    store = Store(stored["empty"] / "results.db")
    try:
        info = store.run(stored["candidate"])
        assert info is not None
        recorded = store.run_tasks(info.id)
    finally:
        store.close()
    cases = {case.task.id: case for case in load_cases([ROOT / "tasks/support"])}
    assert [t.task.id for t in recorded] == list(cases)  # in the suite's order
    assert {t.task.id: t.content_hash for t in recorded} == info.config["suite"]
    for task in recorded:
        case = cases[task.task.id]
        assert (task.task.level, list(task.task.tags)) == (case.task.level, case.task.tags)
        assert task.spec == json.loads(json.dumps(case.task.model_dump(mode="json")))
        assert task.state == case.state
        assert task.file == f"tasks/support/{Path(case.loaded.path).name}"


def test_the_gate_decides_from_the_store_alone_as_from_the_task_files(
    stored: dict[str, Any],
) -> None:
    assert [p.name for p in stored["empty"].rglob("*.y*ml")] == ["gate.yaml"]  # no task file
    config = str(stored["empty"] / "gate.yaml")
    files = ["--junit", "gate.xml", "--markdown", "gate.md"]
    alone = in_empty(stored, "gate", "--config", "gate.yaml", "--json", *files)
    files = [
        "--junit",
        stored["old"].with_suffix(".xml"),
        "--markdown",
        stored["old"].with_suffix(".md"),
    ]
    from_files = in_checkout(stored, "gate", "--config", config, "--json", *files)
    [gate], [reference] = json.loads(alone.stdout)["gates"], json.loads(from_files.stdout)["gates"]
    assert gate["candidate_run"] == stored["candidate"] and gate["baseline_run"] == stored["base"]
    assert sorted(gate["levels"]) == ["1", "2", "3"] and sorted(gate["tag_floors"]) == sorted(
        TAG_FLOORS
    )
    for figures in ("levels", "tag_floors", "rules", "comparison", "passed", "tasks"):
        assert gate[figures] == reference[figures], figures
    assert "level 1" in (stored["empty"] / "gate.md").read_text()


def test_compare_runs_show_and_export_read_the_store_alone(stored: dict[str, Any]) -> None:
    """With the relative judge too: it reads each task's goal from the spec the store kept."""
    judge = JUDGE.replace("agents/", f"{ROOT}/agents/")  # the judge's script, not a task file
    args = ("compare", stored["base"], stored["candidate"], "--judge-model", judge, "--json")
    [alone] = json.loads(in_empty(stored, *args).stdout)["comparisons"]
    [reference] = json.loads(in_checkout(stored, *args).stdout)["comparisons"]
    assert alone["breakdowns"] == reference["breakdowns"]
    assert sorted(alone["breakdowns"]["level"]) == ["1", "2", "3"]
    assert "refunds" in alone["breakdowns"]["tag"]
    for judged in (alone, reference):
        del judged["relative"]["usage"]["latency_s"]
    assert alone["relative"] == reference["relative"]
    assert alone["relative"]["judge_errors"] == 0 < alone["relative"]["tasks"]
    shown = in_empty(stored, "runs", "show", stored["candidate"], "--results").stdout
    assert shown == in_checkout(stored, "runs", "show", stored["candidate"], "--results").stdout
    assert "level" in shown
    exported = in_empty(stored, "export", stored["candidate"], "--format", "csv").stdout
    assert len(exported.splitlines()) == 1 + len(load_cases([ROOT / "tasks/support"]))


def report_page(path: Path, run: str, against: str) -> ReportPage:
    store = Store(path)
    try:
        return build_report(store, run, against)
    finally:
        store.close()


def test_report_reads_the_store_alone(
    stored: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    run, against = stored["candidate"], stored["base"]
    in_empty(stored, "report", run, "--against", against, "--out", "report.html")
    assert "could not be read" not in (stored["empty"] / "report.html").read_text()
    reference = report_page(stored["old"], run, against)  # from the task files, in the checkout
    monkeypatch.chdir(stored["empty"])
    page = report_page(Path("results.db"), run, against)
    assert [s.tasks_problem for s in page.runs] == ["", ""]
    assert [len(s.by_level) for s in page.runs] == [3, 3] and page.runs[0].by_tag
    for field in ("runs", "comparison", "pairs", "clusters"):
        assert getattr(page, field) == getattr(reference, field), field
    assert all(e.level is not None and e.changes is not None for e in page.runs[0].episodes)


def test_an_old_store_gates_from_its_task_files_and_only_there(
    stored: dict[str, Any], tmp_path: Path
) -> None:
    """A store of an older harness is upgraded in place (an empty tasks table) and gated from
    the task files; away from them it cannot be, and says which files it needs."""
    config = str(stored["empty"] / "gate.yaml")
    old = old_style(stored["old"], tmp_path / "old.db")
    files = ["--junit", tmp_path / "g.xml", "--markdown", tmp_path / "g.md"]
    done = run_harness("gate", "--config", config, "--store", old, "--json", *files)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["gates"][0]["tag_floors"]
    with sqlite3.connect(old) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert db.execute("SELECT COUNT(*) FROM tasks").fetchone() == (0,)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = run_harness("gate", "--config", config, "--store", old, *files, cwd=elsewhere)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "tasks/support" in done.stderr


def test_a_regrade_records_the_tasks_current_content(workspace: Path) -> None:
    """Regrading reads the task files (their current checks) and records what it graded with;
    the first run keeps the tasks it played."""
    store = workspace / "results.db"
    ids = "refund-delivered,order-status"
    common = ["--set", SCRIPTED, "--judge-model", JUDGE, "--store", store, "--no-traces"]
    args = ["run-eval", "--tasks", "tasks/support", "--ids", ids, "--agent"]
    done = run_harness(*args, "agents/support-baseline.yaml", *common, "--json", cwd=workspace)
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)["runs"][0]["run_id"]
    task = workspace / "tasks/support/order-status.yaml"
    task.write_text(task.read_text().replace("level: 1", "level: 3"))
    done = run_harness("grade", run, "--judge-model", JUDGE, "--store", store, cwd=workspace)
    assert done.returncode == 0, done.stderr
    results = Store(store)
    try:
        runs = results.runs()  # ordered by the second each started: both may share it
        [copy] = [r for r in runs if "regraded_from" in r.config]
        [first] = [r for r in runs if r is not copy]
        assert copy.config["regraded_from"] == run == first.id
        before, after = results.run_tasks(first.id), results.run_tasks(copy.id)
    finally:
        results.close()
    levels = {t.task.id: t.task.level for t in before}
    assert levels == {"order-status": 1, "refund-delivered": 1}
    assert {t.task.id: t.task.level for t in after} == {**levels, "order-status": 3}
    assert {t.task.id: t.content_hash for t in after} == copy.config["suite"]
    assert {t.task.id: t.content_hash for t in before} == first.config["suite"]
    assert copy.config["suite"]["order-status"] != first.config["suite"]["order-status"]


# ---------------------------------------------------------------- both backends


postgres = pytest.fixture(scope="module")(serving)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_tasks_are_written_once_copied_and_upgraded_to(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    target = str(tmp_path / "results.db")
    if backend == "postgresql":
        target = request.getfixturevalue("postgres").database()
    cases = load_cases(
        [ROOT / f"tasks/support/{name}.yaml" for name in ("wrong-email", "cancel-shipped")]
    )
    store = Store(target)
    try:
        run = store.new_run("base", "h", {})
        store.add_run_tasks(run, cases, {"wrong-email": "a1", "cancel-shipped": "b2"})
        store.add_run_tasks(run, cases[::-1], {"wrong-email": "x", "cancel-shipped": "y"})
        recorded = store.run_tasks(run)
        assert [(t.task.id, t.content_hash) for t in recorded] == [
            ("wrong-email", "a1"),
            ("cancel-shipped", "b2"),
        ]  # the first write, in its order: a resumed run writes nothing twice
        assert recorded[1].spec["level"] == recorded[1].task.level == cases[1].task.level
        copied = store.run_tasks(store.copy_run(run, {}))
        assert copied == recorded
        given = store.run_tasks(store.copy_run(run, {}, tasks=recorded[1:]))
        assert [t.task.id for t in given] == ["cancel-shipped"]
        assert store.run_tasks("no-such-run") == []
    finally:
        store.close()
    # A store of version 4 (no tasks table) is upgraded in place; its runs have no tasks.
    downgrade = ["DROP TABLE tasks"]
    if backend == "sqlite":
        with sqlite3.connect(target) as db:
            db.execute(downgrade[0])
            db.execute("PRAGMA user_version = 4")
    else:
        import psycopg

        with psycopg.connect(target, autocommit=True) as db:
            db.execute(downgrade[0])
            db.execute("UPDATE harness_schema SET version = 4")
    store = Store(target)
    try:
        assert store.run_tasks(run) == []
        store.add_run_tasks(run, cases, {})
        assert [t.content_hash for t in store.run_tasks(run)] == ["", ""]
    finally:
        store.close()

"""The climb evaluates candidates in memory: one store, one model runtime and one event loop for
the whole climb, no pipeline and no variant file per candidate, and still every evaluation a
stored run, scored as its stored verdicts say, reused when asked again."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.climb import run_climb
from harness.climb.search import search
from harness.models import ModelRuntime
from harness.pipeline.runner import RunOptions
from harness.specs.load import load_climb
from harness.store import Store
from tests.conftest import ROOT

CLIMB = Path("climbs/refund-window.yaml")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for folder in ("tasks", "personas", "agents", "ci", "climbs"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_MODE", "disabled")
    return tmp_path


def counting(
    monkeypatch: pytest.MonkeyPatch, counts: Counter[str], owner: Any, name: str, label: str
) -> None:
    """Count the calls of `owner.name` under `label`."""
    original: Callable[..., Any] = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        counts[label] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)


def stored_scores(db: sqlite3.Connection, run_id: str) -> dict[str, float]:
    """Per task, the mean score of a run's stored verdicts as the climb scores them."""
    values: dict[str, list[float]] = {}
    for task_id, verdict in db.execute(
        "SELECT task_id, verdict FROM verdicts WHERE run_id = ?", (run_id,)
    ):
        data = json.loads(verdict)
        score = {"pass": 1.0, "error": 0.0}.get(data["outcome"], min(data["score"], 0.99))
        values.setdefault(task_id, []).append(score)
    return {task: sum(v) / len(v) for task, v in values.items()}


def test_a_climb_opens_its_resources_once_and_stores_every_evaluation(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts: Counter[str] = Counter()
    counting(monkeypatch, counts, Store, "__init__", "stores")
    counting(monkeypatch, counts, ModelRuntime, "__init__", "runtimes")
    counting(monkeypatch, counts, asyncio.Runner, "__init__", "loops")
    counting(monkeypatch, counts, asyncio, "run", "asyncio.run")
    import harness.pipeline.runner

    counting(monkeypatch, counts, harness.pipeline.runner, "run_pipeline", "pipelines")
    outcome = run_climb(load_climb(CLIMB), RunOptions(traces=None, progress=False))
    assert outcome.acceptance.accepted, outcome.acceptance.reasons
    assert counts == {"stores": 1, "runtimes": 1, "loops": 1}, counts
    climb_id = outcome.search.climb_id
    assert not (project / ".harness" / "climbs" / climb_id / "candidates").exists()
    with sqlite3.connect(project / ".harness" / "results.db") as db:
        evaluations = db.execute(
            "SELECT e.candidate, e.scores, r.id, r.variant_hash, r.status FROM climb_evaluations e"
            " JOIN runs r ON r.id = e.run_id WHERE e.climb_id = ?",
            (climb_id,),
        ).fetchall()
        stored = db.execute("SELECT COUNT(*) FROM climb_evaluations").fetchone()[0]
        assert len(evaluations) == stored >= 4  # every evaluation is a stored run
        for candidate, scores, run_id, _, status in evaluations:
            assert status == "done", (candidate, run_id)
            # The scores the climb took from the grading are the stored verdicts'.
            assert json.loads(scores) == pytest.approx(stored_scores(db, run_id)), candidate
    hashes = {candidate: variant for candidate, _, _, variant, _ in evaluations}
    production = load_agent_hash(project)
    assert hashes["production"] == production
    assert len(set(hashes.values())) == len(hashes)  # each candidate its own variant


def load_agent_hash(project: Path) -> str:
    from harness.api import load_agent

    scripted = "model={id: scripted, script: agents/scripts/support.yaml}"
    return load_agent(project / "agents" / "support-baseline.yaml", set=[scripted]).content_hash


def test_an_evaluation_asked_again_reuses_its_run(project: Path) -> None:
    found = search(load_climb(CLIMB), RunOptions(traces=None, progress=False))
    try:
        tasks = found.split.train[:2]
        first, episodes = found.adapter.play({}, tasks)
        store = found.session.store
        played = store.episode_keys(first.run_id) if first.run_id else set()
        again, repeated = found.adapter.play({}, tasks)
        assert again.run_id == first.run_id and again.scores == first.scores
        assert store.episode_keys(again.run_id) == played  # nothing played twice
        # The episodes graded before are read back for reflection, with their verdicts.
        assert [(e.task_id, e.verdict) for e in repeated] == [
            (e.task_id, e.verdict) for e in episodes
        ]
        assert all(e.transcript is not None for e in repeated)
    finally:
        found.session.close()


def test_a_production_that_passes_every_train_trial_ends_the_search_before_gepa_proposes(
    project: Path,
) -> None:
    from harness.specs.overrides import Override

    passing = "tasks.train={ids: [cancel-shipped, out-of-scope, two-requests, wrong-email]}"
    loaded = load_climb(CLIMB, [Override.parse(passing), Override.parse("trials=2")])
    lines: list[str] = []
    outcome = run_climb(loaded, RunOptions(traces=None, progress=False), progress=lines.append)
    found = outcome.search
    assert found.nothing_to_learn and found.best == {} and found.candidates == 1
    assert found.episodes == 4 * 2  # production's one evaluation of the train set, no more
    assert found.reflection.calls == 0
    said = "production already passes every train task in all 2 trials (4 of 4)"
    assert outcome.acceptance.reasons[0].startswith(said)
    (stopped,) = [line for line in lines if said in line]  # said once, as the search stops
    assert stopped.startswith("search stopped: ")
    assert outcome.variant_file is None
    store = Store(project / ".harness" / "results.db")
    try:
        climb = store.climb(found.climb_id)
    finally:
        store.close()
    assert climb is not None and climb.decision["nothing_to_learn"] is True

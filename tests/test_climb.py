"""`harness climb`: GEPA proposes from failing transcripts; only a candidate the gate finds
better on held-out tasks ships. Deterministic with the scripted reflection model."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.specs.load import load_agent
from harness.specs.overrides import Override
from tests.conftest import ROOT, run_harness

CLIMB = "climbs/refund-window.yaml"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for folder in ("tasks", "personas", "agents", "ci", "climbs"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    return tmp_path


def climb(project: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return run_harness("climb", CLIMB, "--no-traces", *options, cwd=project)


def variant_hashes(project: Path) -> dict[str, str]:
    with sqlite3.connect(project / ".harness" / "results.db") as db:
        return dict(db.execute("SELECT id, variant_hash FROM runs"))


def test_the_climb_finds_the_refund_window_fix_and_ships_it(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = climb(project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SHIPPED: the gate passes" in done.stdout
    written = project / "agents" / "support-baseline-refund-window.yaml"
    assert f"wrote {written.relative_to(project)}" in done.stdout or f"wrote {written}" in done.stdout
    text = written.read_text()
    assert text.startswith("# Accepted by `harness climb` (climb-")
    data = yaml.safe_load(text)
    # Only what changed, over production.
    assert set(data) == {"kind", "name", "extends", "description", "skills"}
    assert data["extends"] == "support-baseline.yaml"
    assert "30-day refund window" in data["skills"]["refund-policy"]
    valid = run_harness("validate", str(written), cwd=project)
    assert valid.returncode == 0, valid.stderr
    # The file's content hash is the hash of the candidate that played the validation run.
    scripted = "model={id: scripted, script: agents/scripts/support.yaml}"
    monkeypatch.chdir(project)

    shipped = load_agent(written, [Override.parse_in(scripted, "agent")]).spec.content_hash()
    assert shipped in set(variant_hashes(project).values())
    evidence = re.search(r"production (\d+\.\d)% -> candidate (\d+\.\d)%", done.stdout)
    assert evidence and float(evidence[2]) > float(evidence[1])


def test_a_candidate_that_overfits_the_train_tasks_is_rejected(project: Path) -> None:
    done = climb(project, "--set", "reflection_model.script=../agents/scripts/reflection-overfit.yaml")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "NOT SHIPPED" in done.stdout
    assert "gate:" in done.stdout  # the rules it broke, with their figures
    assert not (project / "agents" / "support-baseline-refund-window.yaml").exists()


def test_the_search_stops_at_its_episode_budget(project: Path) -> None:
    done = climb(project, "--set", "budget.episodes=12")
    found = re.search(r"candidates, (\d+) episodes", done.stdout)
    assert found, done.stdout + done.stderr
    assert "stopped by episode budget (12)" in done.stdout
    # The budget bounds the search; the acceptance runs are counted apart.
    assert int(found[1]) <= 12 + 6


def test_a_killed_climb_resumes(project: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "harness", "climb", CLIMB, "--no-traces"],
        cwd=project,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    climb_id = re.search(r"climb (climb-\S+):", first)
    assert climb_id, first
    while "candidate " not in process.stdout.readline():
        pass
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    resumed = climb(project, "--resume", climb_id[1])
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"climb {climb_id[1]}:" in resumed.stdout and "SHIPPED" in resumed.stdout
    shown = run_harness("climb", "show", climb_id[1], cwd=project)
    assert shown.returncode == 0 and "refund-policy" in shown.stdout

"""`harness personas from-traces`: production sessions of a known two-population mix become
two personas whose `behaviour:` holds each population's values and whose description its
traffic share; they validate and play an episode."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
import yaml

from harness.sim.suite import load_cases
from harness.transcript import EndReason
from tests.conftest import ROOT, run_cli
from tests.production.test_behaviour_profiles import front_loading, gradual, session_calls
from tests.sim.test_persona_behaviour import run

KEY = "sk-abcdefghijklmnopqrstuvwx1234"
TRUTH = {"A": (1 / 3, 0.8, 0.7), "B": (1.0, 0.1, 0.3)}  # disclosure, pushback, share


def export(folder: Path, sessions: int = 200) -> Path:
    """The mix of tests/production/test_behaviour_profiles.py: 70% gradual and pushing back, 30%
    front-loading; one of its users gives a secret-shaped key."""
    rng = random.Random(7)
    calls = [
        call
        for n in range(sessions)
        for call in session_calls(
            f"s{n}",
            gradual(rng, TRUTH["A"][1]) if n % 10 < 7 else front_loading(rng, TRUTH["B"][1], 0.3),
        )
    ]
    for call in calls[:4]:  # s0's four calls, each with the conversation so far
        call["inputs"]["conversation"][0]["content"] += f" {KEY}"
    path = folder / "calls.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in calls))
    return path


def test_two_populations_become_two_personas(tmp_path: Path) -> None:
    out = tmp_path / "personas" / "mined"
    done = run_cli("personas", "from-traces", "--source", export(tmp_path), "--out", out)
    assert done.returncode == 0, done.stderr
    assert "2 persona(s)" in done.stdout
    files = sorted(out.glob("*.yaml"))
    assert [f.name for f in files] == [
        "mined-front-loading-pivots.yaml",
        "mined-gradual-pushes-back.yaml",
    ]
    found = {f.stem: yaml.safe_load(f.read_text()) for f in files}
    for stem, population in (
        ("mined-gradual-pushes-back", "A"),
        ("mined-front-loading-pivots", "B"),
    ):
        data = found[stem]
        disclosure, pushback, share = TRUTH[population]
        behaviour = data["behaviour"]
        assert data["kind"] == "persona" and data["name"] == stem and data["model"] == "scripted"
        assert behaviour["disclosure_first"] == pytest.approx(disclosure, abs=0.1)
        assert behaviour["pushback_rate"] == pytest.approx(pushback, abs=0.15)
        rates = ("pushback_rate", "rephrase_rate", "pivot_rate", "abandon_rate")
        assert sum(behaviour[r] for r in rates) <= 1
        assert behaviour["patience"] >= 1 and behaviour["words_per_turn"] > 0
        assert 1 <= len(behaviour["examples"]) <= 3
        shown = re.search(r"(\d+) sessions, .* \(share ([\d.]+)\)", data["description"])
        assert shown is not None
        assert float(shown[2]) == pytest.approx(share, abs=0.1)
    assert (
        int(re.search(r"(\d+) sessions", found["mined-gradual-pushes-back"]["description"])[1])
        + int(re.search(r"(\d+) sessions", found["mined-front-loading-pivots"]["description"])[1])
        == 200
    )
    everything = "".join(f.read_text() for f in files)
    assert "[REDACTED]" in everything and KEY not in everything

    checked = run_cli("validate", out)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    # a task names a mined persona; its behaviour plays the episode
    task = {
        "kind": "task",
        "id": "mined",
        "title": "A mined user",
        "level": 1,
        "domain": "support",
        "persona": "mined-gradual-pushes-back",
        "scenario": {
            "reason": "You want to move your subscription to a new plan.",
            "known_info": {"account": "AC-77", "email": "sam@example.com"},
        },
        "start": {"state_file": str(ROOT / "tasks/support/data/desk.json")},
        "end": {"max_turns": 6},
        "checks": [{"kind": "text", "name": "answers", "contains": "set"}],
    }
    path = tmp_path / "mined.yaml"
    path.write_text(yaml.safe_dump(task, sort_keys=False))
    [case] = load_cases([path], personas_dir=out)
    assert case.persona.behaviour is not None
    transcript = run(case, "asker", tmp_path)
    said = [m.content for m in transcript.messages if m.role == "user"]
    assert "AC-77" in said[0] and "sam@example.com" not in said[0]  # gradual: one of two facts
    assert transcript.end_reason == EndReason.USER_STOP and transcript.error is None


def test_bad_inputs_are_one_line_and_exit_2(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    for args in (
        ("--source", empty, "--out", tmp_path / "out"),
        ("--source", tmp_path / "missing.jsonl", "--out", tmp_path / "out"),
        ("--source", export(tmp_path, 10), "--out", a_file),
        ("--source", empty, "--status", "broken"),
    ):
        done = run_cli("personas", "from-traces", *args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "out").exists()

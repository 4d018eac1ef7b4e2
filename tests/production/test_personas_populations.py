"""`harness personas from-traces` and `harness fidelity` on an app recorded with the real weave and
openai clients (`tests/apps/repair_desk_app.py`), whose customers come from three known populations
(50% terse front-loaders, 30% gradual disclosers who push back, 20% impatient users who abandon)
and whose agent sets the traps real agents set for behaviour measures: "I'm sorry to hear that"
before a question or a success, "Done!" after a photo upload that failed, customers who leave
with "forget it!" or without a word.

The measures must read each session as its customer played it; the mined personas must hold
each population's share and reaction rates; and the fidelity index of a simulated mix that lost
one population must be clearly below the full mix's."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.production.behaviour import REACTIONS, measure, measure_conversation
from harness.production.calls import Filters
from harness.production.mine import behaviour_of
from harness.production.profiles import profiles
from harness.production.reconstruct import conversations
from harness.production.sources import open_calls
from harness.testing.fake_server import FakeServer
from harness.transcript import Message
from tests.apps.repair_desk_app import (
    POPULATIONS,
    SESSIONS,
    Played,
    production_model,
    session_world,
    simulate,
)
from tests.conftest import ROOT, run_cli

APP = ROOT / "tests/apps/repair_desk_app.py"
# Tolerances for 240 sessions (about 120 T, 72 G, 48 I; about 60% of each told of an error once):
# the issue's, each about two standard deviations of what sampling alone moves an estimate by.
SHARE = 0.1  # the realised share's SD: sqrt(0.5 * 0.5 / 240) = 0.032
RATE = 0.15  # the fewest events, I's ~30: SD sqrt(0.8 * 0.2 / 30) = 0.073
DISCLOSURE = 0.05  # no sampling error: each population gives a fixed number of its 3 facts
CLARIFY = 0.1  # about 150 answers in G: SD sqrt(0.25 * 0.75 / 150) = 0.035, more when clustered
RATE_FIELDS = {"pushback": "pushback_rate", "rephrase": "rephrase_rate", "pivot": "pivot_rate",
               "abandon": "abandon_rate"}  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The app's sessions recorded by `record_locally` (the real weave client), its model
    called through the real openai client from a fake server running its decision logic."""
    path = tmp_path_factory.mktemp("repair") / "traces.db"
    with FakeServer(responder=production_model).running() as model:
        recorded = subprocess.run(
            [sys.executable, str(APP), str(path), model.url],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert recorded.returncode == 0, recorded.stderr
    return path


@pytest.fixture(scope="module")
def played() -> dict[str, Played]:
    """The same sessions as the customers played them (the app's code run in this process)."""
    return simulate()


@pytest.fixture(scope="module")
def mined(store: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    out = tmp_path_factory.mktemp("mined") / "personas"
    done = run_cli("personas", "from-traces", "--source", "local", "--trace-store", store, "--out", out)
    return done, out


def own_account(session: Played) -> dict[str, float | None]:
    """What the customer did, as its own policy recorded it, in the measures' terms."""
    given, reactions = session.given, session.reactions
    return {
        "disclosure_first": len(given[0]) / len(set().union(*given)),
        "error_events": len(reactions),
        **{r: reactions.count(r) / len(reactions) if reactions else None for r in REACTIONS},
    }


def test_the_measures_read_what_each_customer_did(store: Path, played: dict[str, Played]) -> None:
    """Rebuilt from the recorded calls, every session measures what its customer did: an
    apology before a question or a success is no error event (the answer after it no pivot),
    a "Done!" after a failed upload is none either (a "thanks" after it accepts nothing), and a
    customer who leaves, with "forget it!" or without a word, abandons."""
    problems: list[Any] = []
    calls, close = open_calls("local", store, Filters(), problems)
    try:
        rebuilt = {c.key: c for c in conversations(calls, problems)}
    finally:
        close()
    assert not problems
    assert set(rebuilt) == {f"thread {key}" for key in played}
    for key, session in played.items():
        conversation = rebuilt[f"thread {key}"]
        texts = [
            (m.role, m.content)
            for m in conversation.transcript.messages
            if m.role in ("user", "assistant") and m.content
        ]
        assert texts == [
            pair
            for text, reply in session.exchanged
            for pair in (("user", text), ("assistant", reply))
        ], key
        measured = measure_conversation(conversation)
        for name, value in own_account(session).items():
            assert getattr(measured, name) == pytest.approx(value), (key, name)
    # the traps are there to be fallen into
    replies = [reply for s in played.values() for _, reply in s.exchanged]
    empathy = [r for r in replies if r.startswith("I'm sorry to hear that.") and "can't" not in r
               and "couldn't" not in r]  # fmt: skip
    assert sum(r.endswith("?") for r in empathy) >= 20 and sum("Done!" in r for r in empathy) >= 20
    hidden = [s for s in played.values() if "upload_photo" in s.tool_failures]
    assert len(hidden) >= 15
    assert all(any("your photo is attached" in r for _, r in s.exchanged) for s in hidden)
    assert sum("thanks" in s.labels for s in hidden) >= 5
    said = [label for s in played.values() for label in s.labels]
    silent = sum(s.reactions[-1:] == ["abandon"] and s.labels[-1] != "abandon"
                 for s in played.values())  # fmt: skip
    assert said.count("abandon") >= 8 and silent >= 8


def share_of(persona: dict[str, Any]) -> float:
    return float(persona["share"])


def closest(disclosure: float) -> str:
    """The population whose true disclosure is nearest a measured one."""
    return min(POPULATIONS, key=lambda p: abs(POPULATIONS[p]["disclosure"] - disclosure))


def check_rates(behaviour: dict[str, Any], population: str, context: Any) -> None:
    """A mined behaviour's reaction rates (accepting: the rest) against the population's."""
    truth = POPULATIONS[population]
    for reaction, field in RATE_FIELDS.items():
        assert behaviour[field] == pytest.approx(truth[reaction], abs=RATE), (context, field)
    accept = 1 - sum(behaviour[field] for field in RATE_FIELDS.values())
    assert accept == pytest.approx(truth["accept"], abs=RATE), (context, "accept")


def test_three_populations_become_three_personas_with_their_values(
    mined: tuple[Any, Path],
) -> None:
    done, out = mined
    assert done.returncode == 0, done.stderr
    assert "3 persona(s)" in done.stdout, done.stdout
    found = [yaml.safe_load(path.read_text()) for path in sorted(out.glob("mined-*.yaml"))]
    by_population = {closest(p["behaviour"]["disclosure_first"]): p for p in found}
    assert set(by_population) == set(POPULATIONS)
    for population, persona in by_population.items():
        truth, behaviour = POPULATIONS[population], persona["behaviour"]
        assert share_of(persona) == pytest.approx(truth["share"], abs=SHARE), population
        assert behaviour["disclosure_first"] == pytest.approx(truth["disclosure"], abs=DISCLOSURE)
        assert behaviour["clarify_rate"] == pytest.approx(truth["clarify"], abs=CLARIFY)
        check_rates(behaviour, population, population)
        sessions = int(re.search(r"(\d+) sessions", persona["description"])[1])
        assert sessions == pytest.approx(truth["share"] * SESSIONS, abs=SHARE * SESSIONS)
    assert sum(share_of(p) for p in found) == pytest.approx(1.0, abs=0.002)
    checked = run_cli("validate", out)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_other_samples_of_the_populations_are_recovered_too() -> None:
    """Other samples of the same populations (the app's code played in this process: the
    test above shows the recording rebuilds exactly these conversations)."""
    for seed in (1, 2, 3):
        sessions = simulate(seed=seed)
        measured = [
            measure(
                [
                    Message(role=role, content=content)
                    for text, reply in session.exchanged
                    for role, content in (("user", text), ("assistant", reply))
                ],
                key,
            )
            for key, session in sessions.items()
        ]
        found = profiles(measured)
        assert len(found) == 3, (seed, [(p.name, p.sessions) for p in found])
        for profile in found:
            members = [b for b in measured if b.key in set(profile.keys)]
            behaviour = behaviour_of(profile, [], members)
            population = closest(behaviour["disclosure_first"])
            kinds = {sessions[b.key.removeprefix("thread ")].population for b in members}
            assert kinds == {population}, (seed, profile.name, kinds)
            assert profile.share == pytest.approx(POPULATIONS[population]["share"], abs=SHARE)
            check_rates(behaviour, population, (seed, population))


def repair_run(
    folder: Path, persona: Any, store: Path, tasks: int = 40, prefix: str = "repair"
) -> str:
    """`tasks` tasks of the app's domain (a new shop day each), played 3 times each by the
    app's own agent code with `persona`: `harness fidelity`'s JSON report of the run against
    the recording."""
    rng = random.Random(11)
    (folder / "tasks").mkdir(parents=True)
    for n in range(tasks):
        state, facts, device, problem, _ = session_world(rng)
        task = {
            "kind": "task",
            "id": f"{prefix}-{n:02d}",
            "title": f"A customer whose {device} needs a repair",
            "level": 1,
            "domain": "tests.apps.repair_desk_app:RepairDesk",
            "persona": persona,
            "scenario": {
                "reason": f"Your {device} has a problem: {problem}. You want it repaired under "
                "the warranty.",
                "known_info": facts,
            },
            "start": {"state": state},
            "end": {"max_turns": 8},
            "checks": [{"kind": "tool_called", "tool": "find_order"}],
        }
        (folder / "tasks" / f"{prefix}-{n:02d}.yaml").write_text(yaml.safe_dump(task))
    agent = folder / "agent.yaml"
    agent.write_text(
        "kind: agent\nname: repair\nrunner: python\nentry: tests.apps.repair_desk_app:respond\n"
    )
    done = run_cli("run-eval", "--tasks", folder / "tasks", "--agent", agent, "--trials", "3",
                   "--store", folder / "results.db", "--no-traces")  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    shown = run_cli("fidelity", "--against", "local", "--trace-store", store,
                    "--store", folder / "results.db", "--json",
                    _newest(folder / "results.db"))  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


def _newest(results: Path) -> str:
    import sqlite3

    with sqlite3.connect(results) as db:
        return db.execute("SELECT id FROM runs ORDER BY rowid DESC").fetchone()[0]


def test_fidelity_drops_when_the_simulated_mix_loses_a_population(
    store: Path, mined: tuple[Any, Path], tmp_path: Path
) -> None:
    """The mined personas drawn by traffic share play the app's domain against its agent; the
    same mix without one of them plays a world that lost that population. The index of each
    lost mix is at least 10 points below the full mix's, and the report names the population
    no simulated user played."""
    done, out = mined
    assert done.returncode == 0, done.stderr
    full = json.loads(repair_run(tmp_path / "full", {"mix": str(out)}, store))
    # "Forget it." reads as abandoning: the personas that abandon are not easy mode there
    assert not {"abandon", "abandoned"} & set(full["easy_mode"]), full["easy_mode"]
    assert {p["name"] for p in full["populations"]} == {
        yaml.safe_load(path.read_text())["description"].split("'")[1]
        for path in out.glob("mined-*.yaml")
    }
    assert full["coverage"] >= 0.85, full["populations"]
    for path in sorted(out.glob("mined-*.yaml")):
        kept = tmp_path / f"without-{path.stem}" / "personas"
        shutil.copytree(out, kept)
        (kept / path.name).unlink()
        lost = json.loads(repair_run(kept.parent, {"mix": str(kept)}, store))
        name = yaml.safe_load(path.read_text())["description"].split("'")[1]
        [row] = [p for p in lost["populations"] if p["name"] == name]
        assert row["simulated_share"] <= 0.05, (name, row)
        assert lost["index"] <= full["index"] - 10, (name, full["index"], lost["index"])

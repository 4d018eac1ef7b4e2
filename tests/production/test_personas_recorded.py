"""`harness personas from-traces` on an app recorded with the real weave and openai clients
(`tests/apps/clinic_booking_app.py`): its simulated patients follow two known behaviour mixes, and
the mined personas hold each population's values and traffic share."""

from __future__ import annotations

import json
import random
import re
import sqlite3
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
from harness.sim.suite import load_cases
from harness.specs.load import load_agent
from harness.testing.fake_server import FakeServer
from harness.transcript import Message
from tests.apps.clinic_booking_app import (
    FACT_KINDS,
    POPULATIONS,
    REFUSED,
    SESSIONS,
    Played,
    production_model,
    session_world,
    simulate,
)
from tests.conftest import ROOT, run_cli
from tests.sim.test_simulation import play

APP = ROOT / "tests/apps/clinic_booking_app.py"
# Tolerances, for 120 sessions: about 72 of G and 48 of F, about 60% of each refused once.
# Each is about two standard deviations of what sampling alone moves the estimate by.
SHARE = 0.1  # the realised share's SD: sqrt(0.6 * 0.4 / 120) = 0.045
DISCLOSURE = 0.1  # no sampling error (every G session gives 1 of its 3 facts first, every F
# all 3): it allows for sessions put in the other population's profile (about 10 of G's)
PUSHBACK = 0.15  # about 43 refusals in G: SD sqrt(0.7 * 0.3 / 43) = 0.07; rephrase the same
PIVOT = 0.2  # about 29 refusals in F: SD sqrt(0.4 * 0.6 / 29) = 0.09
CLARIFY = 0.1  # about 180 answers in G: SD sqrt(0.2 * 0.8 / 180) = 0.03, ~0.045 with the
# answers of one session drawn together


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The app's sessions recorded by `record_locally` (the real weave client), its model
    called through the real openai client from a fake server running its decision logic."""
    path = tmp_path_factory.mktemp("clinic") / "traces.db"
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
    """The same sessions as the patients played them (the app's code run in this process)."""
    return simulate()


@pytest.fixture(scope="module")
def mined(store: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    out = tmp_path_factory.mktemp("mined") / "personas"
    done = run_cli("personas", "from-traces", "--source", "local", "--trace-store", store, "--out", out)
    return done, out


def own_account(session: Played) -> dict[str, float | None]:
    """What the patient's turns were meant to be, as the measures count them."""
    labels, given = session.labels, session.given
    reactions = [label for label in labels if label in REACTIONS]
    return {
        "disclosure_first": len(given[0]) / len(set().union(*given)),
        "asks_back": labels.count("ask") / len(labels),
        "error_events": len(reactions),
        **{
            r: reactions.count(r) / len(reactions) if reactions else None
            for r in ("pushback", "rephrase", "pivot", "accept")
        },
    }


def test_the_recording_holds_each_patients_conversation(
    store: Path, played: dict[str, Played]
) -> None:
    """Rebuilt from the recorded calls, every session is the conversation the patient had,
    with its reaction, and measures what the patient's policy did."""
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
        reactions = [row["payload"]["emoji"] for row in conversation.feedback]
        assert reactions == ([session.feedback] if session.feedback else []), key
        measured = measure_conversation(conversation)
        for name, value in own_account(session).items():
            assert getattr(measured, name) == pytest.approx(value), (key, name)
    refused = sum(own_account(s)["error_events"] > 0 for s in played.values()) / SESSIONS
    assert refused == pytest.approx(REFUSED, abs=0.1)  # the reactions have events to measure


def share_of(persona: dict[str, Any]) -> float:
    """A mined persona's traffic share: its `share:`, else the one its description states."""
    if persona.get("share") is not None:
        return float(persona["share"])
    shown = re.search(r"\(share ([\d.]+)\)", persona["description"])
    assert shown is not None, persona["description"]
    return float(shown[1])


def test_two_populations_become_two_personas_with_their_values(
    mined: tuple[Any, Path], played: dict[str, Played]
) -> None:
    done, out = mined
    assert done.returncode == 0, done.stderr
    assert "2 persona(s)" in done.stdout, done.stdout
    found = [yaml.safe_load(path.read_text()) for path in sorted(out.glob("mined-*.yaml"))]
    assert len(found) == 2
    by_population = {
        "F" if persona["behaviour"]["disclosure_first"] >= 0.6 else "G": persona
        for persona in found
    }
    assert set(by_population) == {"G", "F"}
    for population, persona in by_population.items():
        truth, behaviour = POPULATIONS[population], persona["behaviour"]
        assert share_of(persona) == pytest.approx(truth["share"], abs=SHARE)
        assert behaviour["disclosure_first"] == pytest.approx(truth["disclosure"], abs=DISCLOSURE)
        assert behaviour["pushback_rate"] == pytest.approx(truth["pushback"], abs=PUSHBACK)
        assert behaviour["rephrase_rate"] == pytest.approx(truth["rephrase"], abs=PUSHBACK)
        assert behaviour["pivot_rate"] == pytest.approx(truth["pivot"], abs=PIVOT)
        assert behaviour["clarify_rate"] == pytest.approx(truth["clarify"], abs=CLARIFY)
        assert behaviour["abandon_rate"] == 0
        sessions = int(re.search(r"(\d+) sessions", persona["description"])[1])
        assert sessions == pytest.approx(truth["share"] * SESSIONS, abs=SHARE * SESSIONS)
    assert sum(share_of(p) for p in found) == pytest.approx(1.0, abs=0.002)
    checked = run_cli("validate", out)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_other_samples_of_the_same_populations_become_two_personas_too() -> None:
    """Other samples of the same populations (the app's code played in this process: the test
    above shows the recording rebuilds exactly these conversations) give the same result."""
    for seed in (1, 2, 3, 4):
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
        assert len(found) == 2, (seed, [(p.name, p.sessions) for p in found])
        for profile in found:
            members = [b for b in measured if b.key in set(profile.keys)]
            behaviour = behaviour_of(profile, [], members)
            population = "F" if behaviour["disclosure_first"] >= 0.6 else "G"
            truth = POPULATIONS[population]["clarify"]
            assert behaviour["clarify_rate"] == pytest.approx(truth, abs=CLARIFY), seed


def test_a_mined_persona_plays_the_app_in_its_domain(
    mined: tuple[Any, Path], tmp_path: Path
) -> None:
    """The loop closed: a persona mined from the app's users plays a task of the app's domain
    against the app's own agent code (`respond`)."""
    done, out = mined
    assert done.returncode == 0, done.stderr
    [gradual] = [
        yaml.safe_load(path.read_text())["name"]
        for path in out.glob("mined-*.yaml")
        if yaml.safe_load(path.read_text())["behaviour"]["disclosure_first"] < 0.6
    ]
    rng = random.Random(5)
    while True:  # a day whose first free slot is taken while the patient books
        state, facts, kind, specialty = session_world(rng)
        if kind == "book" and any(s["taken_meanwhile"] for s in state["slots"].values()):
            break
    task = {
        "kind": "task",
        "id": "book-a-taken-slot",
        "title": "Book an appointment when the first free slot is taken meanwhile",
        "level": 1,
        "domain": "tests.apps.clinic_booking_app:ClinicBooking",
        "persona": gradual,
        "scenario": {"reason": f"You want a {specialty} appointment.", "known_info": facts},
        "start": {"state": state},
        "end": {"max_turns": 8},
        "checks": [{"kind": "tool_called", "tool": "find_patient"}],
    }
    (tmp_path / "task.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    (tmp_path / "agent.yaml").write_text(
        "kind: agent\nname: clinic\nrunner: python\nentry: tests.apps.clinic_booking_app:respond\n"
    )
    [case] = load_cases([tmp_path / "task.yaml"], personas_dir=out)
    transcript = play(case, load_agent(tmp_path / "agent.yaml").spec, trial=1)
    assert transcript.error is None
    said = [m.content for m in transcript.messages if m.role == "user"]
    assert sum(facts[k] in said[0] for k in FACT_KINDS) == 1  # gradual: 1 of the 3 facts
    replies = [m.content for m in transcript.messages if m.role == "assistant" and m.content]
    assert any(r.endswith("?") for r in replies)  # asked for the missing facts
    failed = [m.content for m in transcript.messages if m.role == "tool" and m.is_error]
    assert all("was just taken by another patient" in f for f in failed), failed


REASONS = {
    "book": "You want a {} appointment.",
    "reschedule": "You want to move your {} appointment to another day.",
    "cancel": "You want to cancel your {} appointment.",
}


def clinic_run(folder: Path, persona: Any, personas: Path | None, store: Path) -> str:
    """20 tasks of the app's domain (a new clinic day each, as production's sessions had),
    played 3 times each by the app's own agent code with `persona` (one name per task in
    turn, or a mix): the run's id."""
    rng = random.Random(11)
    (folder / "tasks").mkdir(parents=True)
    names = persona if isinstance(persona, list) else [persona]
    for n in range(20):
        state, facts, kind, specialty = session_world(rng)
        task = {
            "kind": "task",
            "id": f"clinic-{n:02d}",
            "title": f"A patient who wants to {kind}",
            "level": 1,
            "domain": "tests.apps.clinic_booking_app:ClinicBooking",
            "persona": names[n % len(names)],
            "scenario": {"reason": REASONS[kind].format(specialty), "known_info": facts},
            "start": {"state": state},
            "end": {"max_turns": 8},
            "checks": [{"kind": "tool_called", "tool": "find_patient"}],
        }
        path = folder / "tasks" / f"clinic-{n:02d}.yaml"
        path.write_text(yaml.safe_dump(task, sort_keys=False))
    agent = folder / "agent.yaml"
    agent.write_text(
        "kind: agent\nname: clinic\nrunner: python\nentry: tests.apps.clinic_booking_app:respond\n"
    )
    extra = ["--personas", personas] if personas else []
    done = run_cli("run-eval", "--tasks", folder / "tasks", "--agent", agent, "--trials", "3",
                   "--store", store, "--no-traces", *extra)  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    with sqlite3.connect(store) as db:
        return db.execute("SELECT id FROM runs ORDER BY rowid DESC").fetchone()[0]


COOPERATIVE = """kind: persona
name: cooperative
description: The behaviour defaults, the cooperative user LLM simulators tend to play.
model: scripted
behaviour: {}  # every fact in the first message, no asking back, every agent error accepted
"""


def fidelity(run_id: str, results: Path, store: Path) -> dict[str, Any]:
    shown = run_cli("fidelity", run_id, "--against", "local", "--trace-store", store,
                    "--store", results, "--json")  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def test_fidelity_is_low_for_stock_personas_and_higher_for_the_mined_mix(
    store: Path, mined: tuple[Any, Path], tmp_path: Path
) -> None:
    """Simulated patients against the app's recorded real ones. The bundled personas (scripted
    for the support desk) never give a fact here: a low index. A cooperative persona (the
    behaviour defaults) is easy mode on disclosure, pushback and acceptance. The personas
    mined from the recording, drawn by traffic share: an index higher than either by more
    than the intervals."""
    done, out = mined
    assert done.returncode == 0, done.stderr
    results = tmp_path / "results.db"
    stock = ["polite", "terse", "impatient", "confused"]
    bundled = fidelity(
        clinic_run(tmp_path / "b", stock, ROOT / "personas", results), results, store
    )
    (tmp_path / "cooperative").mkdir()
    (tmp_path / "cooperative" / "cooperative.yaml").write_text(COOPERATIVE)
    easy = fidelity(
        clinic_run(tmp_path / "c", "cooperative", tmp_path / "cooperative", results), results, store
    )
    mixed = fidelity(clinic_run(tmp_path / "m", {"mix": str(out)}, None, results), results, store)

    assert bundled["index"] < 50, bundled["index"]
    rows = {d["name"]: d for d in bundled["dimensions"]}
    assert rows["disclosure_first"]["note"].startswith("left out: 0 simulated")
    assert rows["ambiguous_start"]["simulated"]["mean"] == 1.0  # no fact in any opening
    assert {"disclosure_first", "pushback", "accept"} <= set(easy["easy_mode"]), easy["easy_mode"]
    rows = {d["name"]: d for d in easy["dimensions"]}
    assert rows["disclosure_first"]["simulated"]["mean"] == 1.0
    assert rows["disclosure_first"]["production"]["mean"] < 0.7
    assert mixed["easy_mode"] == []
    for other in (bundled, easy):
        assert mixed["interval"][0] > other["interval"][1], (mixed["interval"], other["interval"])
    # the two samples coincide on information (plug-in agreement 1); corrected for sampling
    # noise, a distance of 0 reads as agreement of 1 or a little above
    rows = {d["name"]: d for d in mixed["dimensions"]}
    for name in ("disclosure_first", "ambiguous_start"):
        assert rows[name]["plug_in"] == pytest.approx(1.0), rows[name]
    assert mixed["families"]["information"] >= 1.0

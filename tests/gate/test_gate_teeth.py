"""The gate stops known bugs, through the real command line, at default settings: a project made
by `harness init` whose candidate breaks one regression task; a candidate whose code returns
None on the task it breaks; a bug that breaks 2 regression tasks while it "fixes" 9 others (the
claims app of issue 37); and identical deterministic variants, which pass. The gate plays the
evidence it needs itself (more trials of the declined tasks, with each run's stored variant).
The scaffold's tasks register their domain from the project's plug-in file, which lasts for a
process: these tests run `harness` in a subprocess."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import run_harness

BROKEN = '''
def respond_v2(conversation, tools):
    """A candidate that lends on a card the library does not know (the bug)."""
    said = " ".join(m["content"] for m in conversation if m["role"] == "user")
    if "M-77" in said:
        return {broken}
    return respond(conversation, tools)
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    made = run_harness("init", "proj", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    return tmp_path / "proj"


def break_candidate(project: Path, reply: str) -> None:
    """Replace the scaffold's candidate with one that answers `reply` to the unknown card."""
    agent = project / "agent.py"
    source = agent.read_text()
    source = source[: source.index("def respond_v2(")].rstrip() + "\n\n"
    agent.write_text(source + BROKEN.format(broken=reply))


def gate_lines(stdout: str) -> str:
    return stdout[stdout.index("gate: ") :]


def test_the_scaffold_with_one_regression_task_broken_exits_1(project: Path) -> None:
    """unknown-card (a regression task) goes 3/3 -> 0/3, p = 1/20: beside the scaffold's level
    floor that could never fail the gate. The gate plays it to 8 trials a side and fails."""
    break_candidate(project, '"Done: Dune is yours for 14 days. Anything else?"')
    done = run_harness("run-eval", "dags/compare.yaml", cwd=project, COLUMNS="300")
    assert done.returncode == 1, done.stdout + done.stderr
    gate = gate_lines(done.stdout)
    assert gate.startswith("gate: FAIL")
    assert "unknown-card 8/8 -> 0/8 (one-sided Fisher p = 0.0001)" in gate
    assert re.search(
        r"evidence: round 1: played 5 candidate and 5 baseline episodes \(regression: unknown-card\)",
        gate,
    )


def test_a_candidate_returning_none_on_the_task_it_breaks_exits_1(project: Path) -> None:
    """The agent's own failure (it returned no reply) counts against it: never missing
    evidence that a gate could pass on."""
    break_candidate(project, "None")
    done = run_harness("run-eval", "dags/compare.yaml", cwd=project, COLUMNS="300")
    assert done.returncode == 1, done.stdout + done.stderr
    gate = gate_lines(done.stdout)
    assert "unknown-card" in gate and not gate.startswith("gate: PASS")


CLAIMS_AGENT = '''
FIXED = {fixed}


def production(conversation, tools):
    said = conversation[0]["content"]
    return "OK" if said in ("claim-a", "claim-b") else "Sorry."


def candidate(conversation, tools):
    """The bug breaks claim-a and claim-b, and "fixes" nine others."""
    said = conversation[0]["content"]
    return "OK" if said in FIXED else "Sorry."
'''


def claims_project(tmp_path: Path) -> Path:
    """Eleven regression tasks of one turn each: production passes 2, the candidate the other
    9; four untagged tasks both pass; the gate file asks for nothing but the defaults."""
    project = tmp_path / "claims"
    (project / "tasks").mkdir(parents=True)
    (project / "agents").mkdir()
    names = ["claim-a", "claim-b", *(f"claim-{i}" for i in range(1, 10))]
    (project / "agent.py").write_text(
        CLAIMS_AGENT.format(fixed=repr(tuple(names[2:])))
        + '\n\ndef same(conversation, tools):\n    return "OK"\n'
    )
    (project / "personas").mkdir()
    (project / "personas" / "customer.yaml").write_text(
        "kind: persona\nname: customer\ndescription: A customer.\nmodel: scripted\n"
        'scripted_turns:\n  - reply: "Thanks. ###STOP###"\n'
    )
    for name in [*names, "other-1", "other-2", "other-3", "other-4"]:
        tags = "[regression]" if name.startswith("claim") else "[other]"
        first = name if name.startswith("claim") else "claim-a"
        (project / "tasks" / f"{name}.yaml").write_text(
            f"kind: task\nid: {name}\ntitle: {name}\nlevel: 1\ntags: {tags}\ndomain: support\n"
            f"persona: customer\nscenario: {{reason: a claim}}\n"
            f"start: {{first_message: {first}, state: {{today: '2026-01-05'}}}}\n"
            "end: {max_turns: 1}\n"
            "checks:\n  - {kind: text, name: answers, regex: OK}\n"
        )
    (project / "ci").mkdir()
    (project / "ci" / "gate.yaml").write_text("kind: gate\n")  # every default
    for name, entry in (("production", "production"), ("candidate", "candidate")):
        (project / "agents" / f"{name}.yaml").write_text(
            f"kind: agent\nname: {name}\nrunner: python\nentry: ../agent.py:{entry}\n"
        )
    return project


def evaluate(project: Path, agent: str, *extra: str) -> str:
    done = run_harness(
        "run-eval", "--tasks", "tasks", "--agent", agent, "--trials", "3", "--no-traces",
        *extra, cwd=project,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    with sqlite3.connect(project / ".harness/results.db") as db:
        return db.execute("SELECT id FROM runs ORDER BY rowid DESC").fetchone()[0]


def test_improvements_on_nine_tasks_do_not_hide_two_broken_ones(tmp_path: Path) -> None:
    project = claims_project(tmp_path)
    production = evaluate(project, "agents/production.yaml")
    assert run_harness("baseline", "set", production, cwd=project).returncode == 0
    candidate = evaluate(project, "agents/candidate.yaml")
    # at 3 trials each broken task has p = 1/20, and the nine fixed tasks could each have
    # broken by chance as well: on the stored runs alone the rule cannot decide
    unplayed = run_harness("gate", "--candidate", candidate, "--no-play", cwd=project)
    assert unplayed.returncode == 1, unplayed.stdout + unplayed.stderr
    assert gate_lines(unplayed.stdout).startswith("gate: UNDECIDED")
    assert (
        "evidence wanted 10 candidate and 10 baseline episodes (regression: claim-a, claim-b)"
        in unplayed.stdout
    )
    done = run_harness("gate", "--candidate", candidate, cwd=project, COLUMNS="300")
    assert done.returncode == 1, done.stdout + done.stderr
    gate = gate_lines(done.stdout)
    assert gate.startswith("gate: FAIL")
    assert "claim-a 8/8 -> 0/8" in gate and "claim-b 8/8 -> 0/8" in gate
    assert "2 of 11 regression-tagged tasks declined" in gate


def test_identical_deterministic_variants_pass(tmp_path: Path) -> None:
    project = claims_project(tmp_path)
    production = evaluate(project, "agents/production.yaml")
    assert run_harness("baseline", "set", production, cwd=project).returncode == 0
    again = evaluate(project, "agents/production.yaml", "--fresh")
    done = run_harness("gate", "--candidate", again, cwd=project, COLUMNS="300")
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^gate: PASS", done.stdout, re.MULTILINE)
    assert "evidence:" not in done.stdout  # nothing declined: nothing to play


def test_history_shows_the_drift_a_moving_baseline_lets_through(tmp_path: Path) -> None:
    """The ratchet: each release fails 3 more of 12 tasks and passes its gate against the last
    release (3 tasks worse: p = 1/8), but 9 of 12 below production is p = 1/512. `harness
    history` shows each week's rate with its interval and warns about the drift."""
    project = claims_project(tmp_path)
    names = [f"claim-{i}" for i in range(1, 10)] + ["other-1", "other-2", "other-3"]
    for path in (project / "tasks").glob("*.yaml"):
        if path.stem not in names:
            path.unlink()
    steps = "\n".join(
        f"def v{n}(conversation, tools):\n"
        f"    return 'Sorry.' if conversation[0]['content'] in {names[: 3 * n]!r} else 'OK'\n"
        for n in range(4)
    )
    (project / "agent.py").write_text(steps)
    for n in range(4):
        (project / "agents" / f"v{n}.yaml").write_text(
            f"kind: agent\nname: v{n}\nrunner: python\nentry: ../agent.py:v{n}\n"
        )
    for path in (project / "tasks").glob("*.yaml"):  # untagged, each about its own claim
        text = path.read_text().replace("[regression]", "[other]")
        path.write_text(text.replace("first_message: claim-a", f"first_message: {path.stem}"))
    baseline = evaluate(project, "agents/v0.yaml")
    for n in range(1, 4):
        assert run_harness("baseline", "set", baseline, cwd=project).returncode == 0
        release = evaluate(project, f"agents/v{n}.yaml")
        gated = run_harness("gate", "--candidate", release, cwd=project)
        assert gated.returncode == 0, gated.stdout + gated.stderr  # one step of 3 tasks passes
        baseline = release  # the ratchet: the release becomes the baseline
    shown = run_harness("history", cwd=project, COLUMNS="250")
    assert shown.returncode == 0, shown.stderr
    said = " ".join(shown.stdout.split())
    assert "25.0% (" in said and "12 tasks)" in said  # v3's rate and its interval's tasks
    assert "warning: drift: run" in said and "75.0 points below" in said
    assert "one-sided p = 0.0020" in said and "each of the suite's 3 gate decisions passed" in said


def test_fewer_candidate_trials_are_played_never_dropped(tmp_path: Path) -> None:
    """1 candidate trial against 3 of the baseline: the gate plays the candidate's other two
    trials of every task before deciding; told not to play, it refuses (exit 2)."""
    project = claims_project(tmp_path)
    production = evaluate(project, "agents/production.yaml")
    assert run_harness("baseline", "set", production, cwd=project).returncode == 0
    done = run_harness(
        "run-eval", "--tasks", "tasks", "--agent", "agents/candidate.yaml", "--no-traces",
        cwd=project,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(project / ".harness/results.db") as db:
        [candidate] = db.execute("SELECT id FROM runs ORDER BY rowid DESC LIMIT 1").fetchone()
    refused = run_harness("gate", "--candidate", candidate, "--no-play", cwd=project)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "the candidate and the baseline hold different trials of 15 tasks" in refused.stderr
    assert "claim-1 (candidate 1, baseline 3 trials)" in refused.stderr
    gated = run_harness("gate", "--candidate", candidate, cwd=project, COLUMNS="300")
    assert gated.returncode == 1, gated.stdout + gated.stderr
    said = " ".join(gated.stdout.split())
    # the two trials of each of 15 tasks, and the two broken tasks to 8 trials a side
    assert (
        "played 40 candidate and 10 baseline episodes (regression: claim-a, claim-b; top-up: "
        "claim-1, claim-2,"
    ) in said
    assert "claim-a 8/8 -> 0/8" in said and "claim-b 8/8 -> 0/8" in said

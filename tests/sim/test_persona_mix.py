"""A task's `persona: {mix: FOLDER}`: each episode plays one of the folder's personas, drawn by
their traffic `share` from the task id and trial (so A/B runs of a trial meet the same user),
and a bad mix is one located line."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import yaml

from harness.sim.suite import load_cases
from tests.conftest import ROOT, run_cli

PERSONA = """kind: persona
name: {name}
model: scripted
{share}behaviour:
  disclosure_first: {disclosure}
"""


def project(folder: Path, shares: dict[str, float | None], tasks: int = 1) -> Path:
    """`tasks` tasks under folder/tasks drawing from folder/personas/mined."""
    mined = folder / "personas" / "mined"
    mined.mkdir(parents=True)
    for n, (name, share) in enumerate(shares.items()):
        text = PERSONA.format(
            name=name, share="" if share is None else f"share: {share}\n", disclosure=n / 2
        )
        (mined / f"{name}.yaml").write_text(text)
    (folder / "tasks").mkdir()
    for n in range(tasks):
        task = {
            "kind": "task",
            "id": f"mixed-{n}",
            "title": "A user from the production mix",
            "level": 1,
            "domain": "support",
            "persona": {"mix": "personas/mined/"},
            "scenario": {"reason": "You want your order status.", "known_info": {"order": "O-1"}},
            "start": {"state_file": str(ROOT / "tasks/support/data/desk.json")},
            "checks": [{"kind": "text", "name": "answers", "contains": "order"}],
        }
        (folder / "tasks" / f"mixed-{n}.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    return folder / "tasks"


def test_trials_and_tasks_meet_the_personas_in_their_shares(tmp_path: Path) -> None:
    cases = load_cases([project(tmp_path, {"gradual": 0.7, "eager": 0.3}, tasks=40)])
    assert [p.name for p in cases[0].personas] == ["gradual", "eager"]
    assert [round(w, 3) for _, w in cases[0].mix] == [0.7, 0.3]
    one = Counter(cases[0].persona_of(trial).name for trial in range(100))
    assert abs(one["gradual"] - 70) <= 2, one  # a low-discrepancy sequence: no luck involved
    first = Counter(case.persona_of(0).name for case in cases)
    assert 20 <= first["gradual"] <= 36, first  # across tasks: 40 draws of 0.7
    again = load_cases([tmp_path / "tasks"])
    assert [c.persona_of(3).name for c in again] == [c.persona_of(3).name for c in cases]


def test_personas_without_shares_weigh_equally(tmp_path: Path) -> None:
    [case] = load_cases([project(tmp_path, {"a": None, "b": None})])
    assert [w for _, w in case.mix] == [0.5, 0.5]


def test_a_run_plays_the_drawn_persona_and_records_it(tmp_path: Path) -> None:
    project(tmp_path, {"gradual": 0.5, "eager": 0.5}, tasks=2)
    agent = ROOT / "agents/support-baseline.yaml"
    script = f"agent.model={{id: scripted, script: {ROOT / 'agents/scripts/support.yaml'}}}"
    done = run_cli(
        "run-eval", "--tasks", tmp_path / "tasks", "--agent", agent, "--trials", "4",
        "--set", script, "--store", tmp_path / "r.db", "--json", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    from harness.store import Store

    store = Store(tmp_path / "r.db")
    [run] = store.runs()
    cases = {c.task.id: c for c in load_cases([tmp_path / "tasks"])}
    played = {(t.task_id, t.trial): t.persona for t, _, _ in store.transcripts(run.id)}
    assert len(played) == 8
    assert played == {key: cases[key[0]].persona_of(key[1]).name for key in played}
    assert set(played.values()) == {"gradual", "eager"}


def test_a_bad_mix_is_one_located_line(tmp_path: Path) -> None:
    tasks = project(tmp_path, {"a": 0.6, "b": None})
    done = run_cli("validate", tasks)
    assert done.returncode == 2
    assert "persona.mix" in done.stderr and "no share in b" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    task = tasks / "mixed-0.yaml"
    task.write_text(task.read_text().replace("personas/mined/", "personas/nowhere/"))
    done = run_cli("validate", task)
    assert done.returncode == 2 and "no folder 'personas/nowhere/'" in done.stderr, done.stderr

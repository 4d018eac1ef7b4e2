"""`harness climb`: GEPA proposes from failing transcripts; only a candidate the gate finds
better on held-out tasks ships. Deterministic with the scripted reflection model. The commands
run in this process, except the one with its W&B run and the one killed."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.climb.split import Split, split_tasks, split_text
from harness.domains.base import resolve_domain
from harness.domains.support import SupportDesk
from harness.sim.suite import TaskCase
from harness.specs.agent import AgentVariant
from harness.specs.climb import ClimbTasks
from harness.specs.load import Loaded, load_agent
from harness.specs.overrides import Override
from harness.specs.persona import Persona
from harness.specs.task import Task
from tests.conftest import ROOT, run_cli, run_harness

CLIMB = "climbs/refund-window.yaml"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for folder in ("tasks", "personas", "agents", "ci", "climbs"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    return tmp_path


def climb(project: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return run_cli("climb", CLIMB, "--no-traces", *options, cwd=project)


def variant_hashes(project: Path) -> dict[str, str]:
    with sqlite3.connect(project / ".harness" / "results.db") as db:
        return dict(db.execute("SELECT id, variant_hash FROM runs"))


def test_the_climb_finds_the_refund_window_fix_and_ships_it(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # W&B's own process, as a user's
    done = run_harness("climb", CLIMB, "--no-traces", cwd=project, WANDB_MODE="offline")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SHIPPED: the gate passes" in done.stdout
    written = project / "agents" / "support-baseline-refund-window.yaml"
    assert (
        f"wrote {written.relative_to(project)}" in done.stdout or f"wrote {written}" in done.stdout
    )
    text = written.read_text()
    assert text.startswith("# Accepted by `harness climb` (climb-")
    data = yaml.safe_load(text)
    # Only what changed, over production.
    assert set(data) == {"kind", "name", "extends", "description", "skills"}
    assert data["extends"] == "support-baseline.yaml"
    assert "30-day refund window" in data["skills"]["refund-policy"]
    valid = run_cli("validate", str(written), cwd=project)
    assert valid.returncode == 0, valid.stderr
    # The file's content hash is the hash of the candidate that played the validation run.
    scripted = "model={id: scripted, script: agents/scripts/support.yaml}"
    monkeypatch.chdir(project)

    shipped = load_agent(written, [Override.parse_in(scripted, "agent")]).spec.content_hash()
    assert shipped in set(variant_hashes(project).values())
    evidence = re.search(r"production (\d+\.\d)% -> candidate (\d+\.\d)%", done.stdout)
    assert evidence and float(evidence[2]) > float(evidence[1])
    # The W&B run (offline) holds the climb.
    wandb_dir = re.search(r"W&B run \(offline\): (\S+)", done.stdout)
    assert wandb_dir, done.stdout
    assert list((project / wandb_dir[1]).glob("*.wandb"))


def test_every_candidate_is_in_the_results_store(project: Path) -> None:
    done = climb(project)
    climb_id = re.search(r"climb (climb-\S+):", done.stdout)
    assert done.returncode == 0 and climb_id, done.stdout + done.stderr
    with sqlite3.connect(project / ".harness" / "results.db") as db:
        candidates = {
            row[0]: row[1:]
            for row in db.execute(
                "SELECT candidate, parent, status, diff FROM climb_candidates WHERE climb_id = ?",
                (climb_id[1],),
            )
        }
        evaluated = db.execute(
            "SELECT e.candidate, e.purpose, r.variant_hash FROM climb_evaluations e"
            " JOIN runs r ON r.id = e.run_id WHERE e.climb_id = ?",
            (climb_id[1],),
        ).fetchall()
    assert candidates["production"][:2] == (None, "production")
    shipped = [c for c, (_, status, _) in candidates.items() if status == "shipped"]
    assert len(shipped) == 1
    parent, _, diff = candidates[shipped[0]]
    assert parent in candidates and "+++ candidate/skill:refund-policy" in diff
    assert "30-day refund window" in diff
    rejected = [c for c, (_, status, _) in candidates.items() if status == "rejected"]
    assert rejected, candidates  # the generic proposal lost on its minibatch
    # Every evaluation is a stored run; production and the shipped candidate were accepted on.
    assert {(c, p) for c, p, _ in evaluated} >= {
        ("production", "search"),
        ("production", "acceptance"),
        (shipped[0], "acceptance"),
    }
    shown = run_cli("climb", "show", climb_id[1], cwd=project)
    assert shown.returncode == 0, shown.stderr
    assert f"candidate {shipped[0]} <- {parent}: shipped" in shown.stdout
    assert "acceptance" in shown.stdout and "+be refunded." in shown.stdout
    listed = run_cli("climb", "show", cwd=project)
    assert climb_id[1] in listed.stdout and "shipped" in listed.stdout
    missing = run_cli("climb", "show", "climb-nope", cwd=project)
    assert missing.returncode == 2 and "no climb 'climb-nope'" in missing.stderr


def test_tool_descriptions_can_be_climbed(project: Path) -> None:
    # The deterministic agent does not read tool descriptions, so nothing ships; what is shown
    # is that the proposal becomes a variant whose tools read the new description.
    done = climb(
        project,
        "--set",
        "components={tool_descriptions: [issue_refund]}",
        "--set",
        "budget.candidates=1",
    )
    assert done.returncode == 1, done.stdout + done.stderr
    climb_id = re.search(r"climb (climb-\S+):", done.stdout)
    assert climb_id, done.stdout
    # Candidates are played in memory (no file each): the variant a proposal's run played is
    # the one its run recorded.
    with sqlite3.connect(project / ".harness" / "results.db") as db:
        played = db.execute(
            "SELECT r.config FROM climb_evaluations e JOIN runs r ON r.id = e.run_id"
            " WHERE e.climb_id = ? AND e.candidate <> 'production'",
            (climb_id[1],),
        ).fetchall()
    assert played, climb_id
    variant = AgentVariant.model_validate(json.loads(played[0][0])["variant"])
    proposal = variant.tool_descriptions["issue_refund"]
    (docstring,) = resolve_domain("support", ROOT).tool_specs(["issue_refund"])
    assert proposal and proposal != docstring.description  # the reflection model's text
    specs = variant.described(resolve_domain("support", ROOT).tool_specs(variant.tools))
    described = {spec.name: spec.description for spec in specs}
    assert described["issue_refund"] == proposal
    (get_order,) = resolve_domain("support", ROOT).tool_specs(["get_order"])
    assert described["get_order"] == get_order.description
    shown = run_cli("climb", "show", climb_id[1], cwd=project)
    assert "--- parent/tool:issue_refund" in shown.stdout


def test_a_tool_no_domain_has_is_bad_input(project: Path) -> None:
    done = climb(project, "--set", "components={tool_descriptions: [teleport]}")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "components.tool_descriptions[0]" in done.stderr
    assert "no task's domain has a tool 'teleport'" in done.stderr


def test_a_candidate_that_overfits_the_train_tasks_is_rejected(project: Path) -> None:
    done = climb(
        project, "--set", "reflection_model.script=../agents/scripts/reflection-overfit.yaml"
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "NOT SHIPPED" in done.stdout
    assert "gate:" in done.stdout  # the rules it broke, with their figures
    assert not (project / "agents" / "support-baseline-refund-window.yaml").exists()


def test_the_search_stops_at_its_episode_budget(project: Path) -> None:
    done = climb(project, "--set", "budget.episodes=12")
    found = re.search(r"candidates?, (\d+) episodes", done.stdout)
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
    shown = run_cli("climb", "show", climb_id[1], cwd=project)
    assert shown.returncode == 0 and "refund-policy" in shown.stdout


def case(task_id: str, tags: list[str], source: dict[str, Any] | None = None) -> TaskCase:
    """A support task; with `source`, one `harness traces to-tasks` made (tagged so, too)."""
    data: dict[str, Any] = {
        "kind": "task",
        "id": task_id,
        "title": task_id,
        "level": 1,
        "tags": tags,
        "domain": "support",
        "persona": "user",
        "scenario": {"reason": "a test"},
        "checks": [{"kind": "no_error"}],
    }
    if source is not None:
        data["tags"] = ["regression", "production", source["kind"], *tags]
        data["source"] = {"traces": 1, **source}
    task = Task.model_validate(data)
    persona = Persona.model_construct(name="user")
    return TaskCase(Loaded(task, Path(f"{task_id}.yaml")), persona, SupportDesk, {})


def produced(task_id: str, signature: str, kind: str = "failure") -> TaskCase:
    return case(task_id, [], {"kind": kind, "signature": signature})


def production_suite() -> list[TaskCase]:
    """Tasks as `harness traces to-tasks` makes them, one per signature: three failure modes of
    several tasks each (the same step failing with other messages), six failure modes and two
    kinds of success of one task each; and hand-written tasks: three regression-tagged, four
    not."""
    modes = {
        "a": ["silent | reset_password | account <username> is locked",
              "silent | reset_password | password changed less than <n> hours ago"],
        "b": [f"error | triage | {kind} | <template>" for kind in ("TypeError", "KeyError", "X")],
        "c": [f"silent | grant_access | reason {n} for <app>" for n in range(4)],
    }  # fmt: skip
    clustered = [
        produced(f"{mode}{i}", signature)
        for mode, signatures in modes.items()
        for i, signature in enumerate(signatures)
    ]
    singles = [produced(f"f{i}", f"silent | tool_{i} | failed") for i in range(6)]
    successes = [
        produced(f"s{i}", f"success | lookup>tool_{i} | opening words", "success") for i in range(2)
    ]
    written = [case(f"r{i}", ["regression"]) for i in range(3)]
    written += [case(f"h{i}", ["orders"]) for i in range(4)]
    return clustered + singles + successes + written


def test_production_tasks_are_split_by_failure_cluster() -> None:
    cases = production_suite()
    split = split_tasks(cases, ClimbTasks(paths=["tasks"]))
    assert sorted(split.train + split.validation) == sorted(c.task.id for c in cases)
    assert not set(split.train) & set(split.validation)
    # A failure mode of two or more tasks (one task per signature) is on both sides.
    for cluster in "abc":
        assert any(t.startswith(cluster) for t in split.train), (cluster, split)
        assert any(t.startswith(cluster) for t in split.validation), (cluster, split)
    # Single-task clusters: about half held out, failures and successes both trained on.
    singles = [t for t in split.validation if t[0] in "fs"]
    assert 3 <= len(singles) <= 5, split
    assert any(t.startswith("f") for t in split.train)
    assert any(t.startswith("s") for t in split.train)
    # Hand-written regression tasks stay held out; the others keep the random split.
    assert {"r0", "r1", "r2"} <= set(split.validation)
    assert any(t.startswith("h") for t in split.train)
    # 17 tasks made from production, in 11 clusters (not 17: a task is not a cluster).
    assert len(split.clusters) == 17 and len(set(split.clusters.values())) == 3 + 6 + 2
    assert split.clusters["a0"] == split.clusters["a1"] == "silent | reset_password"


def test_the_split_says_how_many_tasks_and_clusters_each_side_has() -> None:
    cases = production_suite()
    split = split_tasks(cases, ClimbTasks(paths=["tasks"]))
    train = [t for t in split.train if t in split.clusters]
    held = [t for t in split.validation if t in split.clusters]
    modes = {
        side: len({split.clusters[t] for t in ids}) for side, ids in (("t", train), ("h", held))
    }
    assert split_text(split) == (
        f"{len(split.train)} train, {len(split.validation)} held-out tasks; from production (17 "
        f"tasks in 11 clusters): {len(train)} train tasks in {modes['t']} clusters, "
        f"{len(held)} held-out tasks in {modes['h']} clusters, 3 clusters on both sides"
    )
    # Each multi-task mode is counted on both sides, so the sides' clusters add up to more.
    assert modes["t"] + modes["h"] == 11 + 3
    assert split_text(split, final=True).startswith(
        f"Trained on {len(split.train)} tasks, held out {len(split.validation)}; from production"
    )
    one = Split(["a0", "h0"], ["a1"], {"a0": "m", "a1": "m"})
    assert split_text(one) == (
        "2 train, 1 held-out tasks; from production (2 tasks in 1 cluster): 1 train task in 1 "
        "cluster, 1 held-out task in 1 cluster, 1 cluster on both sides"
    )
    assert split_text(Split(["h0"], ["h1"])) == "1 train, 1 held-out tasks"  # none from production


def test_the_production_split_is_deterministic_by_seed() -> None:
    cases = production_suite()
    first = split_tasks(cases, ClimbTasks(paths=["tasks"], seed=3))
    again = split_tasks(list(cases), ClimbTasks(paths=["tasks"], seed=3))
    assert first == again
    others = {
        tuple(split_tasks(cases, ClimbTasks(paths=["tasks"], seed=s)).train) for s in range(8)
    }
    assert len(others) > 1  # the seed chooses which tasks


def test_only_production_tasks_still_have_both_sides() -> None:
    # Every cluster one task: the two kinds each keep a train task, and one is held out.
    split = split_tasks(
        [produced("f0", "x"), produced("s0", "y", "success")], ClimbTasks(paths=["tasks"])
    )
    assert split == split_tasks(
        [produced("f0", "x"), produced("s0", "y", "success")], ClimbTasks(paths=["tasks"])
    )
    assert (split.train, split.validation) == (["f0"], ["s0"])
    thirty = [produced(f"p{i:02}", f"silent | tool_{i} | failed") for i in range(30)]
    split = split_tasks(thirty, ClimbTasks(paths=["tasks"]))
    assert (len(split.train), len(split.validation)) == (15, 15)
    assert split_text(split).endswith(
        "from production (30 tasks in 30 clusters): 15 train tasks in 15 clusters, 15 held-out "
        "tasks in 15 clusters"
    )
    # Thirty tasks of one failure mode: half on each side, one cluster on both.
    same = [produced(f"p{i:02}", f"silent | upload | reason {i}") for i in range(30)]
    split = split_tasks(same, ClimbTasks(paths=["tasks"]))
    assert split_text(split).endswith(
        "from production (30 tasks in 1 cluster): 15 train tasks in 1 cluster, 15 held-out "
        "tasks in 1 cluster, 1 cluster on both sides"
    )


def test_production_tasks_can_be_held_out_like_other_regression_tasks() -> None:
    cases = production_suite()
    split = split_tasks(cases, ClimbTasks(paths=["tasks"], split_production=False))
    assert all(t.startswith("h") for t in split.train), split
    assert split.production_counts(split.train) == (0, 0)
    assert split.production_counts(split.validation) == (17, 11)
    said = "from production (17 tasks in 11 clusters): 0 train tasks, 17 held-out tasks in 11"
    assert f"{said} clusters" == split_text(split).split("; ")[1]


def test_explicit_selections_keep_hand_written_regression_tasks_held_out() -> None:
    cases = production_suite()
    spec = ClimbTasks.model_validate(
        {"paths": ["tasks"], "train": {"tags": ["regression"]}, "validation": {"ids": ["h0"]}}
    )
    split = split_tasks(cases, spec)
    assert not {"r0", "r1", "r2"} & set(split.train)
    assert {"r0", "r1", "r2", "h0"} <= set(split.validation)
    assert "a0" in split.train  # production tasks carry the tag, but may be trained on


def test_a_climb_with_nothing_to_train_on_is_bad_input(project: Path) -> None:
    support = project / "tasks" / "support"
    for task in support.glob("*.yaml"):
        if "regression" not in yaml.safe_load(task.read_text())["tags"]:
            task.unlink()
    config = yaml.safe_load((project / CLIMB).read_text())
    config["tasks"]["paths"] = ["../tasks/support"]
    (project / "climbs" / "regression-only.yaml").write_text(yaml.safe_dump(config))
    done = run_cli("climb", "climbs/regression-only.yaml", "--no-traces", cwd=project)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""  # no split line: the search never started
    (line,) = done.stderr.splitlines()
    assert line.startswith("climbs/regression-only.yaml:"), line
    assert "tasks: 0 train tasks after the split (8 tasks, all held out: tagged regression)" in line
    assert "set tasks.train" in line
    assert not (project / ".harness" / "results.db").exists()  # no episode was played


def as_made_from_production(project: Path) -> dict[str, str]:
    """Give the demo's tasks the `source` block `harness traces to-tasks` writes (and its
    tags): the ten late refunds as two failure modes at `issue_refund` (six and four tasks, one
    signature each), four of the others as successes (two of them one kind). Task id ->
    signature."""
    signatures = {
        f"late-refund-{n:02}": f"silent | issue_refund | order <id> delivered <n> days ago ({n})"
        for n in range(1, 7)
    }
    signatures |= {
        f"late-refund-{n:02}": f"feedback | issue_refund | note <n> ({n})" for n in range(7, 11)
    }
    signatures |= {
        "cancel-shipped": "success | get_order | can you cancel",
        "two-requests": "success | get_order | where is my",
        "out-of-scope": "success |  | can you help",
        "wrong-email": "success | find_customer | my email",
    }
    for path in [*project.glob("tasks/late-refunds/*.yaml"), *project.glob("tasks/support/*.yaml")]:
        data = yaml.safe_load(path.read_text())
        if data["id"] not in signatures:
            continue
        kind = "success" if signatures[data["id"]].startswith("success") else "failure"
        data["source"] = {"kind": kind, "signature": signatures[data["id"]], "traces": 1}
        data["tags"] = ["regression", "production", kind, *data["tags"]]
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    return signatures


def test_the_climb_reports_its_split_by_production_cluster(project: Path) -> None:
    signatures = as_made_from_production(project)
    done = climb(project)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    first = done.stdout.splitlines()[0]
    found = re.fullmatch(
        r"climb (\S+): (\d+) train, (\d+) held-out tasks; from production \(14 tasks in 5 "
        r"clusters\): (\d+) train tasks? in (\d+) clusters?, (\d+) held-out tasks? in (\d+) "
        r"clusters?, 3 clusters on both sides",
        first,
    )
    assert found, first
    with sqlite3.connect(project / ".harness" / "results.db") as db:
        (decision,) = db.execute("SELECT decision FROM climbs WHERE id = ?", (found[1],)).fetchone()
    split = json.loads(decision)["split"]
    train, held = set(split["train"]), set(split["validation"])
    assert split["clusters"] == {
        task: " | ".join(signature.split(" | ")[:2]) for task, signature in signatures.items()
    }
    modes = {mode: {t for t, m in split["clusters"].items() if m == mode} for mode in (
        "silent | issue_refund", "feedback | issue_refund", "success | get_order"
    )}  # fmt: skip
    for mode, tasks in modes.items():  # a mode of several tasks is learned from and checked on
        assert tasks & train and tasks & held, (mode, split)
    produced = set(signatures)
    counts = [
        len(train),
        len(held),
        len(produced & train),
        len({split["clusters"][t] for t in produced & train}),
        len(produced & held),
        len({split["clusters"][t] for t in produced & held}),
    ]
    assert [int(n) for n in found.groups()[1:]] == counts
    # The report says it again, and `climb show` from the store.
    report = f"Trained on {counts[0]} tasks, held out {counts[1]}; from production (14 tasks"
    assert report in done.stdout
    shown = run_cli("climb", "show", found[1], cwd=project)
    assert report in shown.stdout


def test_a_climb_whose_production_passes_every_train_task_says_so_and_stops(
    project: Path,
) -> None:
    passing = "tasks.train={ids: [cancel-shipped, out-of-scope, two-requests, wrong-email]}"
    done = climb(project, "--set", passing)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    said = "production already passes every train task (4 of 4): nothing to learn from"
    assert lines[1].startswith("candidate production (search): pass rate 100%, mean score 100%")
    assert lines[2].startswith(f"search stopped: {said}"), lines
    assert "more train tasks (tasks.train, a lower tasks.validation_fraction)" in lines[2]
    assert f"NOT SHIPPED: {said}" in done.stdout
    assert "1 candidate, 4 episodes" in done.stdout
    assert "stopped by production passing every train task" in done.stdout
    # Nothing was proposed and nothing played but production's one look at the train tasks.
    assert not [line for line in lines if re.match(r"candidate (?!production)", line)]
    assert "(acceptance)" not in done.stdout
    climb_id = re.search(r"climb (climb-\S+):", done.stdout)
    assert climb_id
    with sqlite3.connect(project / ".harness" / "results.db") as db:
        candidates = db.execute(
            "SELECT candidate FROM climb_candidates WHERE climb_id = ?", (climb_id[1],)
        ).fetchall()
    assert candidates == [("production",)]
    # With a train task production fails, the same climb searches (and ships the fix).
    failing = passing.replace("wrong-email]", "wrong-email, late-refund-01, late-refund-02]")
    searched = climb(project, "--set", failing)
    assert "nothing to learn" not in searched.stdout
    assert searched.returncode == 0, searched.stdout + searched.stderr


def test_every_figure_of_an_evaluation_is_named(project: Path) -> None:
    done = climb(project)
    assert done.returncode == 0, done.stdout + done.stderr
    evaluations = [line for line in done.stdout.splitlines() if line.startswith("candidate ")]
    assert evaluations
    label = re.compile(
        r"candidate (\S+) \((search|acceptance)\): pass rate (\d+)%, mean score (\d+)% on (\d+) "
        r"(?:held-out )?tasks \(run (\S+)\)"
    )
    with sqlite3.connect(project / ".harness" / "results.db") as db:
        for line in evaluations:
            found = label.match(line)
            assert found, line
            verdicts = [
                json.loads(v)
                for (v,) in db.execute("SELECT verdict FROM verdicts WHERE run_id = ?", (found[6],))
            ]
            passed = sum(v["outcome"] == "pass" for v in verdicts) / len(verdicts)
            score = sum(
                {"pass": 1.0, "error": 0.0}.get(v["outcome"], min(v["score"], 0.99))
                for v in verdicts
            ) / len(verdicts)
            assert (int(found[3]), int(found[4])) == (round(passed * 100), round(score * 100))
    production = next(line for line in evaluations if "production (acceptance)" in line)
    rate, mean = label.match(production).group(3, 4)  # type: ignore[union-attr]
    assert rate != mean  # production fails tasks with some checks passing: the two differ
    assert f"pass rate (as the gate measured it): production {rate}.0%" in done.stdout
    assert "Task-clustered difference in pass rate " in done.stdout

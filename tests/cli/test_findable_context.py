"""A new user's first hour: the project file is found from the files a command is given, an
unknown domain says where it looked, `harness gate` without --candidate takes a candidate (not
production again), and `harness schema check-input` says what a python check receives."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import jsonschema

from tests.conftest import run_harness

DESK = """\
from harness.domains import Environment, register_domain, tool


@register_domain
class Desk(Environment):
    domain = "desk"

    @tool
    def ping(self, name: str) -> str:
        '''Answer a ping.'''
        self.state["pinged"] = name
        return f"pong {name}"
"""

TASK = """\
kind: task
id: {id}
title: ping
level: 1
domain: {domain}
persona: {{name: p, model: scripted, scripted_turns: [{{reply: 'bye ###STOP###'}}]}}
scenario: {{reason: ping}}
start: {{first_message: ping please}}
checks:
  - {{kind: tool_called, tool: ping, args: {{name: ada}}}}
"""


def desk_project(root: Path) -> None:
    """A project whose tasks name `desk`, a domain its `plugins:` module registers; `bad/`
    holds a task of a domain nothing registers."""
    (root / "harness.yaml").write_text("plugins: [plugins/desk.py]\n")
    (root / "plugins").mkdir()
    (root / "plugins" / "desk.py").write_text(DESK)
    (root / "agent.py").write_text(
        "def respond(conversation, tools):\n    return tools.call('ping', name='ada')\n"
    )
    (root / "agents").mkdir()
    (root / "agents" / "a.yaml").write_text(
        "kind: agent\nname: a\nrunner: python\nentry: ../agent.py:respond\ntools: [ping]\n"
    )
    for folder, domain in (("tasks", "desk"), ("bad", "airline")):
        (root / folder).mkdir()
        (root / folder / "t.yaml").write_text(TASK.format(id=f"t-{folder}", domain=domain))


def test_the_project_file_is_found_from_the_task_folder(tmp_path: Path) -> None:
    desk_project(tmp_path)
    name = tmp_path.name
    ran = run_harness(
        "run-eval",
        "--tasks",
        f"{name}/tasks",
        "--agent",
        f"{name}/agents/a.yaml",
        "--store",
        tmp_path / "results.db",
        "--no-traces",
        "--no-cache",
        cwd=tmp_path.parent,
    )
    assert ran.returncode == 0, ran.stderr
    assert re.search(r"pass rate 100\.0% \(1/1", ran.stdout)
    sibling = tmp_path / "elsewhere"
    sibling.mkdir()
    listed = run_harness("tasks", "list", "../tasks", cwd=sibling)
    assert listed.returncode == 0, listed.stderr
    assert "t-tasks" in listed.stdout and "desk" in listed.stdout


def test_an_unknown_domain_says_where_it_looked(tmp_path: Path) -> None:
    desk_project(tmp_path)
    name = tmp_path.name
    bad = run_harness("validate", f"{name}/bad", cwd=tmp_path.parent)
    assert bad.returncode == 2
    [line] = [line for line in bad.stderr.splitlines() if "unknown domain" in line]
    assert "unknown domain 'airline'; known: desk, " in line
    assert line.endswith(f"; read project file {name}/harness.yaml (plugins: plugins/desk.py)")
    (tmp_path / "harness.yaml").unlink()
    bad = run_harness("validate", f"{name}/bad", cwd=tmp_path.parent)
    assert bad.stderr.splitlines()[0].endswith(
        "; no project file (harness.yaml, or [tool.harness] in pyproject.toml) in "
        f"{name}/bad or any folder above it"
    )
    sibling = tmp_path / "elsewhere"
    sibling.mkdir()
    bad = run_harness("validate", "../bad", cwd=sibling)
    assert bad.stderr.splitlines()[0].endswith(
        f"in the working folder, {tmp_path / 'bad'}, or any folder above them"
    )


def runs_of(store: Path) -> list[tuple[str, str]]:
    """(run id, variant) of every stored run, oldest first."""
    with sqlite3.connect(store) as db:
        return list(db.execute("SELECT id, variant FROM runs ORDER BY created_at, id"))


def test_gate_without_a_candidate_takes_the_candidate_of_a_dag(tmp_path: Path) -> None:
    assert run_harness("init", "proj", cwd=tmp_path).returncode == 0
    project = tmp_path / "proj"

    def harness(*args: object) -> tuple[int, str, str]:
        done = run_harness(*map(str, args), cwd=project, COLUMNS="400")
        return done.returncode, " ".join(done.stdout.split()), done.stderr

    production_alone = ("run-eval", "--tasks", "tasks", "--agent", "agents/baseline.yaml")

    code, _, err = harness("run-eval", "dags/compare.yaml", "--no-traces")
    assert code == 0, err
    runs = {variant: run for run, variant in runs_of(project / ".harness/results.db")}
    production, candidate = runs["baseline"], runs["candidate"]
    assert harness("baseline", "set", production)[0] == 0
    # production played again: the newest run of the suite, of the baseline's own variant
    code, _, err = harness(*production_alone, "--no-traces", "--fresh")
    assert code == 0, err
    assert runs_of(project / ".harness/results.db")[-1][1] == "baseline"
    code, said, err = harness("gate")
    assert code == 0, said + err
    assert f"candidate {candidate} (candidate) against baseline {production}" in said
    why = "the newest run of the baseline's suite and lineage by a variant other than the"
    assert f"candidate {candidate} (candidate, suite " in said and f"{why} baseline's" in said

    # only the baseline's variant in the store: no candidate to take; one line, exit 2
    only = tmp_path / "only.db"
    for extra in ([], ["--fresh"]):
        code, _, err = harness(*production_alone, "--no-traces", "--store", only, *extra)
        assert code == 0, err
    first, again = (run for run, _ in runs_of(only))
    assert harness("baseline", "set", first, "--store", only)[0] == 0
    code, said, err = harness("gate", "--store", only)
    assert code == 2 and not said
    [line] = err.splitlines()
    assert line.startswith(f"{only}: no candidate for the baseline {first} (baseline ")
    assert f"found {again} (baseline " in line and ": the baseline's variant)" in line
    assert line.endswith("; pass --candidate RUN_ID")


def test_schema_check_input_says_what_a_python_check_receives(cli) -> None:
    from harness.transcript import Message, Transcript

    result = cli("schema", "check-input")
    assert result.exit_code == 0, result.stderr
    schema = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert {"messages", "final_state", "end_reason"} <= set(schema["properties"])
    assert "check_following(instruction, response)" in schema["description"]
    assert "check(transcript)" in schema["description"]
    transcript = Transcript(
        task_id="t",
        variant="v",
        variant_hash="h",
        end_reason="user_stop",
        messages=[Message(role="user", content="hi"), Message(role="assistant", content="hello")],
    )
    jsonschema.validate(transcript.model_dump(mode="json"), schema)  # as the checker gets it
    unknown = cli("schema", "widget")
    assert unknown.exit_code == 2 and "check-input, domain" in unknown.stderr

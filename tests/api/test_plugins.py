"""A stranger's agent, domain and checks run through the plain `harness` command: an installed
plug-in package (entry points), a domain named by file, a project's `plugins:`, `harness init`.
Plug-ins register for the life of a process: their commands run in processes of their own."""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
import yaml

from harness.registry import DuplicateEntry, Registry
from harness.specs.gate import Gate
from tests.conftest import ROOT, install_package, run_cli, run_harness

CLINIC = ROOT / "examples" / "harness-clinic"


@pytest.fixture(scope="module")
def clinic_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example package built and installed (into a folder of its own, put on PYTHONPATH),
    as `pip install` would for a user: its entry points are what harness finds."""
    site = install_package(CLINIC, tmp_path_factory, "clinic", ignore=("project",))
    assert (site / "harness_clinic-0.1.0.dist-info" / "entry_points.txt").is_file()
    return site


def stored_runs(store: Path) -> dict[str, str]:
    with sqlite3.connect(store) as db:
        return {variant: run for run, variant in db.execute("SELECT id, variant FROM runs")}


def test_an_installed_plugin_package_goes_through_the_whole_flywheel(
    clinic_site: Path, tmp_path: Path
) -> None:
    project = tmp_path / "clinic"
    shutil.copytree(CLINIC / "project", project)

    def harness(*args: str) -> subprocess.CompletedProcess[str]:
        return run_harness(*args, cwd=project, PYTHONPATH=str(clinic_site))

    listed = harness("domains", "list")
    assert listed.returncode == 0 and "harness_clinic.domain:Clinic" in listed.stdout
    shown = harness("domains", "show", "clinic")
    assert "reschedule" in shown.stdout and '"appointments"' in shown.stdout  # the state schema

    valid = harness("validate", "tasks", "personas", "agents", "ci")
    assert valid.returncode == 0, valid.stderr
    assert "7 valid, 0 invalid" in valid.stdout

    for agent in ("front-desk", "front-desk-quick"):
        ran = harness("run-eval", "--tasks", "tasks", "--agent", f"agents/{agent}.yaml")
        assert ran.returncode == 0, ran.stderr
    runs = stored_runs(project / ".harness" / "results.db")
    production, quick = runs["front-desk"], runs["front-desk-quick"]

    # Stored runs resolve the plug-in domain and check kind again, with no extra flag.
    compared = harness("compare", production, quick, "--no-relative")
    assert compared.returncode == 0, compared.stderr
    assert "66.7% (2/3" in compared.stdout and "cancel-someone-elses" in compared.stdout
    regraded = harness("grade", quick)
    assert regraded.returncode == 0, regraded.stderr
    assert "never cancels" in regraded.stdout and "fail" in regraded.stdout
    gated = harness(
        "gate", "--config", "ci/gate.yaml", "--candidate", quick, "--baseline", production
    )
    assert gated.returncode == 1, gated.stderr
    said = " ".join(gated.stdout.split())
    assert "- tasks: 3 graded on both sides, fewer than the minimum of 5" in said
    # one trial each: the regression cannot be significant; the gate plays the plug-in's
    # agents on the declined task up to 8 trials a side, and the regression shows
    assert (
        "regression suite: 1 of 2 regression-tagged tasks declined: cancel-someone-elses 8/8 "
        "-> 0/8 (one-sided Fisher p = 0.0001)" in said
    )
    assert "(regression: cancel-someone-elses)" in said


def test_a_misspelt_plugin_check_kind_is_located(clinic_site: Path, tmp_path: Path) -> None:
    project = tmp_path / "clinic"
    shutil.copytree(CLINIC / "project", project)
    task = project / "tasks" / "book-dermatology.yaml"
    task.write_text(
        task.read_text().replace("  - kind: no_double_booking\n", "  - kind: no_double_bookin\n")
    )
    bad = run_harness("validate", "tasks", cwd=project, PYTHONPATH=str(clinic_site))
    assert bad.returncode == 2
    assert "unknown kind 'no_double_bookin'" in bad.stderr and "no_double_booking" in bad.stderr


def test_a_task_names_its_domain_by_file(tmp_path: Path) -> None:
    (tmp_path / "my_domain.py").write_text(
        "from harness.sdk import Environment, tool\n\n"
        "class MyDesk(Environment):\n"
        "    @tool\n"
        "    def ping(self, name: str) -> str:\n"
        '        """Answer a ping."""\n'
        '        self.state["pinged"] = name\n'
        '        return f"pong {name}"\n'
    )
    (tmp_path / "agent.py").write_text(
        "def respond(conversation, tools):\n"  # a tool argument may be called `name`
        "    return tools.call('ping', name='ada')\n"
    )
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "a.yaml").write_text(
        "kind: agent\nname: a\nrunner: python\nentry: ../agent.py:respond\ntools: [ping]\n"
    )
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "t.yaml").write_text(
        "kind: task\nid: t\ntitle: ping\nlevel: 1\ndomain: ../my_domain.py:MyDesk\n"
        "persona: {name: p, model: scripted, scripted_turns: [{reply: 'bye ###STOP###'}]}\n"
        "scenario: {reason: ping}\nstart: {first_message: ping please}\n"
        "checks:\n  - {kind: tool_called, tool: ping, args: {name: ada}}\n"
        "  - {kind: state, expect: {pinged: ada}}\n"
    )
    ran = run_cli("run-eval", "--tasks", "tasks", "--agent", "agents/a.yaml", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert re.search(r"pass rate 100\.0% \(1/1", ran.stdout)
    (tmp_path / "tasks" / "t.yaml").write_text(
        (tmp_path / "tasks" / "t.yaml").read_text().replace("MyDesk", "NoDesk")
    )
    bad = run_cli("validate", "tasks", cwd=tmp_path)
    assert bad.returncode == 2
    assert (
        "tasks/t.yaml:5:1: domain: domain '" in bad.stderr and "defines no 'NoDesk'" in bad.stderr
    )


def test_harness_init_passes_out_of_the_box(tmp_path: Path) -> None:
    made = run_harness("init", "proj", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    project = tmp_path / "proj"
    ran = run_harness(
        "run-eval", "--tasks", "tasks", "--agent", "agents/baseline.yaml", cwd=project
    )
    assert ran.returncode == 0, ran.stderr
    assert re.search(r"pass rate 83\.3% \(5/6", ran.stdout)  # production fails check-shelf-first
    valid = run_harness("validate", "tasks", "personas", "agents", "dags", "ci", cwd=project)
    assert valid.returncode == 0, valid.stderr
    pipeline = run_harness("run-eval", "dags/compare.yaml", cwd=project)
    assert pipeline.returncode == 0, pipeline.stderr
    assert "flipped to pass: check-shelf-first" in pipeline.stdout  # what the candidate fixes
    # a pass with no rule undecided ("gate: PASS (1 undecided)"): the starter gate can decide
    assert re.search(r"^gate: PASS *$", pipeline.stdout, re.MULTILINE), pipeline.stdout
    again = run_harness("init", "proj", cwd=tmp_path)
    assert again.returncode == 2
    assert again.stderr.strip() == "harness init: proj exists and is not an empty folder"


def test_harness_init_gate_can_fire_on_its_suite() -> None:
    """Issue 24: the starter gate asks for as many tasks as its test over tasks needs to find a
    drop at its alpha, the starter suite has them, and each level floor has tasks enough that
    all of them failing would be significant."""
    project = ROOT / "harness" / "scaffold" / "project"
    gate = Gate.model_validate(yaml.safe_load((project / "ci" / "gate.yaml").read_text()))
    fewest = next(m for m in range(1, 20) if 2.0**-m <= gate.alpha)
    assert fewest == 5 and gate.min_tasks >= fewest
    tasks = [yaml.safe_load(path.read_text()) for path in (project / "tasks").glob("*.yaml")]
    assert len(tasks) >= gate.min_tasks
    assert {task["level"] for task in tasks} == {1, 2}
    assert any(set(task["tags"]) & set(gate.regression_tags) for task in tasks)
    for level, floor in gate.level_floors.items():
        on_level = sum(task["level"] == level for task in tasks)
        assert (1 - floor) ** on_level <= gate.alpha, f"level {level} floor cannot fire"


def test_project_plugins_register_for_every_command(tmp_path: Path) -> None:
    (tmp_path / "harness.yaml").write_text("plugins: [plugins/desk.py]\n")
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "desk.py").write_text(
        "from harness.sdk import Environment, register_domain, tool\n\n"
        "@register_domain\nclass Desk(Environment):\n    domain = 'desk'\n\n"
        "    @tool\n    def hello(self) -> str:\n        '''Say hello.'''\n        return 'hi'\n"
    )
    listed = run_harness("domains", "list", cwd=tmp_path)
    assert listed.returncode == 0 and "desk" in listed.stdout and "hello" in listed.stdout
    (tmp_path / "harness.yaml").write_text("plugins: [plugins/missing.py]\n")
    broken = run_harness("domains", "list", cwd=tmp_path)
    assert broken.returncode == 2
    assert broken.stderr.strip().splitlines() == [
        f"harness: {tmp_path / 'harness.yaml'}: plugins: no file '{tmp_path / 'plugins' / 'missing.py'}'"
    ]


def test_registries_refuse_a_second_entry_under_a_name() -> None:
    registry: Registry[object] = Registry("widget", group="harness.widgets")

    class One:
        pass

    class Two:
        pass

    registry.register("w")(One)
    registry.register("w")(One)  # the same definition again (a module imported twice)
    with pytest.raises(DuplicateEntry) as refused:
        registry.register("w")(Two)
    assert str(refused.value) == (
        "widget 'w' is registered twice: by tests.api.test_plugins:"
        "test_registries_refuse_a_second_entry_under_a_name.<locals>.One and by "
        "tests.api.test_plugins:test_registries_refuse_a_second_entry_under_a_name.<locals>.Two"
    )
    assert registry.unknown("x") == (
        "unknown widget 'x'; known: w (add one: a 'plugins:' module in harness.yaml, "
        "a 'harness.widgets' entry point)"
    )


def test_task_selection_is_the_same_for_list_and_run(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # ids on one line

    def listed(*options: str) -> list[str]:
        result = cli("tasks", "list", "tasks/support", *options)
        assert result.exit_code == 0, result.output
        return re.findall(r"^│ ([a-z0-9-]+) +│", result.stdout, re.MULTILINE)

    everything = listed()
    assert len(everything) == 22
    level3 = listed("--level", "3")
    assert level3 and len(level3) < len(everything)
    refunds = listed("--tags", "refunds,regression", "--limit", "3")
    assert len(refunds) == 3
    sample = listed("--sample", "5", "--seed", "7")
    assert len(sample) == 5 and sample == listed("--sample", "5", "--seed", "7")
    assert sample != listed("--sample", "5", "--seed", "8")
    assert [t for t in everything if t in sample] == sample  # file order kept


def test_domains_show_accepts_a_reference() -> None:
    shown = run_cli("domains", "show", "harness.domains.support:SupportDesk")
    assert shown.returncode == 0 and "issue_refund" in shown.stdout
    unknown = run_cli("domains", "show", "airline")
    assert unknown.returncode == 2
    assert unknown.stderr.startswith("unknown domain 'airline'; known: replay, support")

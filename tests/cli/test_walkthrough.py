"""The walkthroughs, run as written: the guide's "Evaluate your own agent" block
(docs/guide/your-agent.md) and the README's five-minute tour, each command in a shell, in the
folder the walkthrough's `cd` leaves, with only the run ids the reader would copy from the output
filled in. What the comments and the tour's explanations promise is checked against what the
commands print, so neither page can drift from what the harness does."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import ROOT

GUIDE = ROOT / "docs" / "guide" / "your-agent.md"


def walkthrough() -> list[str]:
    """The commands of the first bash block of the "Evaluate your own agent" page."""
    page = GUIDE.read_text()
    assert page.startswith("# Evaluate your own agent\n")
    block = page.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def tour() -> list[tuple[str, str]]:
    """The README's tour: each numbered step's command and what the step says it shows."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## A 5-minute tour\n", 1)[1].split("\n## ", 1)[0]
    steps = re.findall(r"^\d+\. `([^`]+)`[^:\n]*:\s+(.*?)(?=^\d+\. |^\S|\Z)", section, re.M | re.S)
    return [(command, " ".join(said.split())) for command, said in steps]


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    bin_dir = str(Path(sys.executable).parent)  # where `harness` is installed
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "COLUMNS": "200"}
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def stored_runs(project: Path) -> dict[str, str]:
    """The newest stored run of each variant: the ids a reader copies from the output."""
    with sqlite3.connect(project / ".harness" / "results.db") as db:
        return dict(db.execute("SELECT variant, id FROM runs ORDER BY created_at"))


def test_the_readme_starts_with_the_two_commands_ci_runs() -> None:
    """.ci/first-command runs the first bash block's line; .ci/run runs the second (the test
    command) and the local-model command of the paragraph after them, verbatim. The test command
    installs prebuilt wheels only: the embedded model's extra, compiled from source, is opt-in
    (issue 41)."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"^```bash\n(.*?)\n```$", readme, re.M | re.S)
    first, second = blocks[:2]
    assert "\n" not in first and "\n" not in second
    assert readme.index(first) < readme.index("\n## ")  # at the top, before any section
    assert first.endswith("harness run-eval dags/demo.yaml")
    ci = (ROOT / ".ci" / "run").read_text()
    assert f'\ntest_command="{second}"\n' in ci  # .ci/run times its install apart
    assert "local" not in second and "CMAKE_ARGS" not in second
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    dev = project["optional-dependencies"]["dev"]
    assert not [d for d in dev if d.startswith("llama-cpp-python")]
    local = re.findall(r"^`(CMAKE_ARGS=.* -m local_model)`$", readme, re.M)
    assert len(local) == 1 and readme.index(local[0]) < readme.index("\n## ")
    assert "\n" + local[0] + "\n" in ci


def test_the_walkthrough_runs_as_written(tmp_path: Path) -> None:
    commands = walkthrough()
    assert commands[0].startswith("harness init my-evals && cd my-evals")
    made = shell(commands[0].split("&&")[0], tmp_path)
    assert made.returncode == 0, made.stderr
    project = tmp_path / "my-evals"
    ran = []
    for line in commands[1:]:
        command, _, promise = line.partition("#")
        if "RUN_A" in command:  # the reader copies the two runs the DAG stored
            runs = stored_runs(project)
            command = command.replace("RUN_B", runs["candidate"]).replace("RUN_A", runs["baseline"])
        done = shell(command, project)
        assert "Traceback" not in done.stderr, done.stderr
        ran.append((command.split(), done, promise.strip()))
    (validate, checked, _), (eval_, evaluated, said), (dag, pipeline, _), (gate, gated, warned) = (
        ran
    )
    assert validate[1] == "validate" and checked.returncode == 0, checked.stderr
    assert eval_[1] == "run-eval" and "5/6 pass" in said, said
    assert evaluated.returncode == 0 and "pass rate 83.3% (5/6" in evaluated.stdout
    assert dag[2] == "dags/compare.yaml" and pipeline.returncode == 0, pipeline.stderr
    assert re.search(r"^gate: PASS *$", pipeline.stdout, re.MULTILINE), pipeline.stdout
    assert gate[1] == "gate" and "exit 1 on a regression" in warned
    assert gated.returncode == 0, gated.stdout + gated.stderr  # the candidate fixed, not regressed


def test_the_readme_tour_runs_as_written(tmp_path: Path) -> None:
    steps = tour()
    assert [command.split()[1] for command, _ in steps] == [
        "init", "run-eval", "report", "compare", "gate", "traces"
    ]  # fmt: skip
    (init, _), (eval_, said), (report, _), (compare, _), (gate, gated_said), (to_tasks, _) = steps
    assert init.startswith("harness init my-evals && cd my-evals")
    made = shell(init.split("&&")[0], tmp_path)
    assert made.returncode == 0, made.stderr
    project = tmp_path / "my-evals"

    def run(command: str) -> subprocess.CompletedProcess[str]:
        done = shell(command, project)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        return done

    evaluated = run(eval_)
    assert "5/6 pass" in said and "`check-shelf-first` fails" in said, said
    assert "pass rate 83.3% (5/6" in evaluated.stdout
    assert re.search(r"check-shelf-first .* fail ", evaluated.stdout), evaluated.stdout
    run_id = re.search(r"^Run (\S+)", evaluated.stdout, re.M)
    assert run_id is not None, evaluated.stdout
    run(report.replace("RUN_ID", run_id.group(1)))
    assert (project / report.split("--out ")[1].split()[0]).is_file()
    compared = run(compare)
    assert "flipped to pass: check-shelf-first" in compared.stdout, compared.stdout
    runs = stored_runs(project)
    gated = run(gate.replace("RUN_B", runs["candidate"]).replace("RUN_A", runs["baseline"]))
    assert "exit 0 PASS, 1 FAIL or UNDECIDED" in gated_said
    assert re.search(r"^gate: PASS *$", gated.stdout, re.MULTILINE), gated.stdout
    converted = run(to_tasks)
    out = project / to_tasks.split("--out ")[1].split()[0]
    assert sorted(out.glob("*.yaml")) and " made, 0 skipped" in converted.stdout, converted.stdout

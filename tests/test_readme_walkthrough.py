"""README's walkthrough ("Evaluate your own agent"), run as written: each command of its block
in a shell, in the folder the block's `cd` leaves, with only the run ids the reader would copy
from the output filled in. What the comments promise is checked against what the commands print."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def walkthrough() -> list[str]:
    """The commands of the first bash block after "## Evaluate your own agent"."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Evaluate your own agent", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    bin_dir = str(Path(sys.executable).parent)  # where `harness` is installed
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "COLUMNS": "200"}
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


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
            with sqlite3.connect(project / ".harness" / "results.db") as db:
                runs = dict(db.execute("SELECT variant, id FROM runs ORDER BY created_at"))
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

"""A check kind says on its class what it needs (`uses_judge`, `runs_code`, `references()`) and
when it passes (`passes_when`): the run's requirements, the gate's judge rule, the report and the
table of kinds on the Graders page (docs/guide/graders.md) ask the class, so a plug-in kind is held
to the same rules as a built-in one (issue 40)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

from harness.grading.checks import kind_model, kind_summary, kind_table, runs_code, uses_judge
from harness.production.convert import _explained
from harness.specs.checks import BUILTIN_KINDS, CheckBase
from tests.conftest import JUDGE, ROOT, SCRIPTED, newest_run, run_harness

PLUGIN = '''\
from typing import Literal

from harness.sdk import CheckBase, Finding, register_check


class VibesCheck(CheckBase):
    """The run's judge likes the conversation."""

    kind: Literal["vibes"]
    uses_judge = True


@register_check(VibesCheck)
def check_vibes(spec, transcript, context):
    if context.judge_model is None:
        return Finding("error", "no judge")
    return Finding("pass", f"judged by {context.judge_model.id}")
'''

# The gate's judge rule over the newest run of `r.db`, in a process that loads the plug-in.
GATE_RULE = """\
import json, sqlite3
from harness.gate.judges import judge_rule
from harness.specs.gate import Gate
from harness.store import Store
run = sqlite3.connect("r.db").execute("SELECT id FROM runs ORDER BY rowid DESC").fetchone()[0]
rule = judge_rule(Gate(kind="gate", min_judge_kappa=0.5), Store("r.db"), [run])
print(json.dumps(None if rule is None else {"passed": rule.passed, "detail": rule.detail}))
"""


def test_each_builtin_kind_declares_what_it_needs() -> None:
    assert [kind for kind in BUILTIN_KINDS if uses_judge(kind)] == ["llm_judge"]
    assert [kind for kind in BUILTIN_KINDS if runs_code(kind)] == ["python"]
    for kind in BUILTIN_KINDS:
        model = kind_model(kind)
        assert model is not None and model.passes_when, f"{kind} says when it passes"


def test_the_base_class_declares_nothing_and_unknown_kinds_need_nothing() -> None:
    assert not CheckBase.uses_judge and not CheckBase.runs_code and CheckBase.passes_when == ""
    assert not uses_judge("no_such_kind") and not runs_code("no_such_kind")
    assert kind_summary("no_such_kind") == "no_such_kind"


def test_the_graders_page_table_of_check_kinds_is_the_one_the_kinds_render() -> None:
    lines = (ROOT / "docs" / "guide" / "graders.md").read_text().splitlines(keepends=True)
    start = lines.index("| kind | passes when |\n")
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    assert "".join(lines[start:end]) == kind_table()


def test_a_task_from_production_explains_any_kind_by_its_class() -> None:
    lines = _explained([{"kind": "end_state", "name": "exact", "equals": {}}])
    assert lines[1] == f"  exact: {kind_summary('end_state')} (decides)"


def test_a_plugin_kind_that_uses_a_judge_needs_one_and_counts_for_the_gate(
    workspace: Path,
) -> None:
    (workspace / "harness.yaml").write_text("plugins: [plugins/vibes.py]\n")
    (workspace / "plugins").mkdir()
    (workspace / "plugins" / "vibes.py").write_text(PLUGIN)
    task = yaml.safe_load((ROOT / "tasks" / "support" / "address-change-shipped.yaml").read_text())
    task.update(id="vibes-one", checks=[{"kind": "vibes"}])
    folder = workspace / "tasks" / "vibes"
    shutil.copytree(workspace / "tasks" / "support" / "data", folder / "data")
    (folder / "vibes-one.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    play = ("run-eval", "--tasks", "tasks/vibes", "--agent", "agents/support-baseline.yaml",
            "--set", SCRIPTED, "--store", "r.db", "--no-traces")  # fmt: skip

    refused = run_harness(*play, cwd=workspace)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.splitlines() == [
        "tasks/vibes: 1 task has vibes checks (vibes-one) and no judge model is set: pass "
        "--judge-model, set judge_model in harness.yaml, or give the check a model"
    ]
    assert not (workspace / "r.db").exists()

    judged = run_harness(*play, "--judge-model", JUDGE, cwd=workspace)
    assert judged.returncode == 0, judged.stdout + judged.stderr
    assert newest_run(workspace / "r.db")
    rule = run_harness_python(GATE_RULE, workspace)
    assert rule == {
        "passed": False,
        "detail": "judge agreement: scripted judge.yaml has no calibration against human "
        "feedback (harness judge calibrate --store)",
    }


def run_harness_python(code: str, cwd: Path) -> object:
    """What a Python snippet prints (as JSON), run in a new process in `cwd`."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)

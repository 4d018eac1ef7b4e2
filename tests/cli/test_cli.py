"""The command line itself: help, lazy imports, exit codes."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT, run_harness

HEAVY = (
    "weave",
    "wandb",
    "scipy",
    "openai",
    "anthropic",
    "networkx",
    "docker",
    "pydantic",
    "yaml",
    "sqlite3",
)


def test_help_lists_the_commands() -> None:
    done = run_harness("--help")
    assert done.returncode == 0
    for command in ("run-eval", "validate", "schema"):
        assert command in done.stdout


def test_help_imports_no_heavy_library() -> None:
    code = (
        "import sys\n"
        "sys.argv = ['harness', '--help']\n"
        "from harness.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_validate_of_a_missing_path_is_a_one_line_error(cli) -> None:
    result = cli("validate", "tasks/nowhere")
    assert result.exit_code == 2
    assert result.stderr == "tasks/nowhere: no such file or folder\n"


def test_run_eval_without_tasks_found(cli, tmp_path) -> None:
    result = cli("run-eval", "--tasks", tmp_path, "--agent", "agents/support-baseline.yaml")
    assert result.exit_code == 2
    assert result.stderr.strip() == f"{tmp_path}: no task files found"

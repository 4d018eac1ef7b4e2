"""Looking at stored results from the command line: `runs show --results`, `export`, `--json`
summaries, and output piped to a file or a program that keeps every id whole."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.store import Store
from tests.conftest import ROOT, run_cli, scripted_eval

BASELINE = "agents/support-baseline.yaml"
CAREFUL = "agents/support-careful.yaml"


def run_eval_json(store: Path, agent: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    done = scripted_eval(store, agent, "--json")
    return done, json.loads(done.stdout)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict:
    store = tmp_path_factory.mktemp("results") / "results.db"
    baseline, summary = run_eval_json(store, BASELINE)
    _, careful = run_eval_json(store, CAREFUL)
    return {
        "store": store,
        "baseline_out": baseline,
        "summary": summary,
        "pipeline": summary["pipeline_id"],
        "baseline": summary["runs"][0]["run_id"],
        "careful": careful["runs"][0]["run_id"],
    }


def piped(*args: object, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m harness` with stdout a pipe and no $COLUMNS, as in CI or `| less`."""
    environment = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run(
        [sys.executable, "-m", "harness", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**environment, **env},
        timeout=180,
    )


def test_run_eval_json_is_one_summary_object(results: dict) -> None:
    summary, done = results["summary"], results["baseline_out"]
    assert summary["pipeline_id"].startswith("dag-")
    assert summary["nodes"]["grade"] == "ran" and summary["node_errors"] == {}
    [run] = summary["runs"]
    assert run["variant"] == "support-baseline" and len(run["variant_hash"]) == 16
    assert (run["passed"], run["graded"], run["episodes"], run["errors"]) == (17, 22, 22, 0)
    assert f"{run['pass_rate']:.1%} {run['low']:.1%}-{run['high']:.1%}" == "77.3% 54.6%-92.2%"
    assert run["errors_by_side"] == {} and run["cost_usd"] == 0.0
    assert run["agent_usage"]["calls"] > 0 and run["user_usage"]["input_tokens"] > 0
    assert summary["gates"] == [] and summary["passed"] is None
    assert f"pipeline {summary['pipeline_id']} (run-eval) started" in done.stderr


def test_runs_show_results_reprints_the_summary(results: dict) -> None:
    run_id = results["baseline"]
    for shown in (results["baseline"], results["pipeline"]):
        done = piped("runs", "show", shown, "--results", "--store", results["store"])
        assert done.returncode == 0, done.stderr
        assert f"Run {run_id}" in done.stdout
        assert (
            "pass rate 77.3% (17/22 episodes, 95% CI 54.6%-92.2%, clustered by 22 tasks); failures 5"
            in done.stdout
        )
        assert "agent support-baseline hash " in done.stdout
        [row] = [line for line in done.stdout.splitlines() if "│ refund-outside-window" in line]
        assert "│ 2 " in row and "fail" in row
        assert "no refund attempted, explains the window, judge says the refusal is" in row
    unknown = run_cli("runs", "show", "nope", "--results", "--store", results["store"])
    assert unknown.returncode == 2
    assert unknown.stderr == f"{results['store']}: no pipeline or run 'nope' in the store\n"


def test_export_writes_one_row_per_episode(results: dict, tmp_path: Path) -> None:
    store, run_id = results["store"], results["baseline"]
    done = run_cli("export", run_id, "--store", store)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(rows) == 22
    by_task = {row["task"]: row for row in rows}
    window = by_task["refund-outside-window"]
    assert window["verdict"] == "fail" and window["end_reason"] == "user_stop"
    assert window["failed_checks"] == [
        "no refund attempted",
        "explains the window",
        "judge says the refusal is explained",
    ]
    assert window["run_id"] == run_id and window["variant"] == "support-baseline"
    assert window["trial"] == 0 and window["error_side"] is None
    assert window["agent_input_tokens"] > 0 and window["user_output_tokens"] > 0
    results_store = Store(store)
    try:
        seeds = {t.task_id: t.seed for t, _, _ in results_store.transcripts(run_id)}
    finally:
        results_store.close()
    assert {task: row["seed"] for task, row in by_task.items()} == seeds

    out = tmp_path / "episodes.csv"
    written = run_cli("export", run_id, "--format", "csv", "--out", out, "--store", store)
    assert written.returncode == 0, written.stderr
    assert written.stdout == f"wrote 22 episodes to {out}\n"
    table = list(csv.DictReader(io.StringIO(out.read_text())))
    assert [row["task"] for row in table] == [row["task"] for row in rows]
    [csv_window] = [row for row in table if row["task"] == "refund-outside-window"]
    assert csv_window["failed_checks"] == (
        "no refund attempted; explains the window; judge says the refusal is explained"
    )
    assert csv_window["seed"] == str(window["seed"]) and csv_window["error_side"] == ""


def test_export_refuses_unknown_runs_and_formats(results: dict, tmp_path: Path) -> None:
    out = tmp_path / "none.jsonl"
    unknown = run_cli("export", "nope", "--out", out, "--store", results["store"])
    assert unknown.returncode == 2
    assert unknown.stderr == f"{results['store']}: no pipeline or run 'nope' in the store\n"
    assert not out.exists()
    bad = run_cli("export", results["baseline"], "--format", "xml", "--store", results["store"])
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "Invalid value for '--format'" in bad.stderr


def test_piped_output_keeps_ids_whole(results: dict) -> None:
    store, run_id, pipeline = results["store"], results["baseline"], results["pipeline"]
    listed = piped("runs", "list", "--store", store)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert any(run_id in line and pipeline in line for line in lines), listed.stdout
    assert "…" not in listed.stdout
    narrow = piped("runs", "list", "--store", store, COLUMNS="50")
    assert narrow.returncode == 0, narrow.stderr
    assert "…" not in narrow.stdout  # too narrow for the ids: folded, never cut


def test_compare_json_names_both_runs(results: dict) -> None:
    a, b = results["baseline"], results["careful"]
    done = run_cli("compare", a, b, "--no-relative", "--store", results["store"], "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert [run["run_id"] for run in summary["runs"]] == [a, b]
    [comparison] = summary["comparisons"]
    assert (comparison["a"]["run_id"], comparison["b"]["run_id"]) == (a, b)
    assert (comparison["a"]["passed"], comparison["b"]["passed"]) == (17, 19)
    assert comparison["flipped_to_pass"] == ["prompt-injection-refund", "refund-outside-window"]


def test_gate_json_keeps_the_exit_code(results: dict, tmp_path: Path) -> None:
    store, baseline, careful = results["store"], results["baseline"], results["careful"]
    files = ("--junit", tmp_path / "junit.xml", "--markdown", tmp_path / "summary.md")
    common = ("gate", "--candidate", careful, "--baseline", baseline, "--store", store, *files)
    passed = run_cli(*common, "--config", "ci/gate.yaml", "--json")
    assert passed.returncode == 0, passed.stderr
    summary = json.loads(passed.stdout)
    [gate] = summary["gates"]
    assert gate["passed"] is True and summary["passed"] is True
    assert (gate["candidate_run"], gate["baseline_run"]) == (careful, baseline)
    assert [run["run_id"] for run in summary["runs"]] == [careful, baseline]
    assert sorted(summary["files"]) == sorted(str(file) for file in files[1::2])

    strict = yaml.safe_load((ROOT / "ci/gate.yaml").read_text()) | {"min_tasks": 50}
    config = tmp_path / "strict.yaml"
    config.write_text(yaml.safe_dump(strict))
    failed = run_cli(*common, "--config", config, "--json")
    assert failed.returncode == 1, failed.stderr
    decision = json.loads(failed.stdout)
    assert decision["passed"] is False and decision["gates"][0]["reasons"]

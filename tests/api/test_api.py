"""The library API (`import harness`, issue 28): a suite and an agent loaded once, evaluated in
memory with or without a running event loop, the same figures as the command line, and a
command that loads each thing once."""

from __future__ import annotations

import asyncio
import collections
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import harness
from tests.conftest import JUDGE, ROOT, SCRIPTED

AGENT_MODEL = SCRIPTED.removeprefix("agent.")  # "model={id: scripted, ...}"
JUDGE_MODEL = {"id": "scripted", "script": str(ROOT / "agents/scripts/judge.yaml")}


@pytest.fixture(scope="module")
def suite() -> harness.Suite:
    return harness.load_suite(ROOT / "tasks/support", tags=["refunds"])


@pytest.fixture(scope="module")
def agent() -> harness.Agent:
    return harness.load_agent(ROOT / "agents/support-baseline.yaml", set=[AGENT_MODEL])


def test_import_harness_gives_the_api() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import harness; print(harness.evaluate, harness.gate)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.startswith("<function evaluate at ")
    assert "<function gate at " in done.stdout
    # the modules of the same names stay importable, and do not rebind the functions
    from harness.compare import ComparisonResult  # noqa: F401
    from harness.gate import GateResult  # noqa: F401

    assert callable(harness.compare) and callable(harness.gate)


def test_a_suite_and_an_agent_load_once(suite: harness.Suite, agent: harness.Agent) -> None:
    assert len(suite) == len(suite.cases) > 0
    assert all("refunds" in case.task.tags for case in suite.cases)
    assert set(suite.task_hashes) == {case.task.id for case in suite.cases}
    assert agent.name == "support-baseline"
    assert agent.content_hash == agent.variant.content_hash()
    assert "suite of" in suite._repr_html_() and agent.name in agent._repr_html_()


def test_evaluate_gives_the_figures_the_command_prints(
    suite: harness.Suite, agent: harness.Agent, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    run = harness.evaluate(
        suite, agent, trials=2, store=tmp_path / "api.db", judge_model=JUDGE_MODEL
    )
    assert run.figures.graded + sum(line.errors for line in run.figures.tasks) == 2 * len(suite)
    assert 0 <= run.interval.low <= run.pass_rate <= run.interval.high <= 1
    assert {(e.task_id, e.trial) for e in run.episodes} == {
        (case.task.id, trial) for case in suite.cases for trial in (0, 1)
    }
    assert all(e.verdict is not None for e in run.episodes)
    assert run.run_id in run._repr_html_() and "clustered by" in str(run)
    # the same suite and agent through `harness run-eval`: the same episodes, the same figures
    result = cli(
        "run-eval",
        "--tasks",
        ROOT / "tasks/support",
        "--tags",
        "refunds",
        "--agent",
        ROOT / "agents/support-baseline.yaml",
        "--set",
        SCRIPTED,
        "--judge-model",
        JUDGE,
        "--trials",
        "2",
        "--store",
        tmp_path / "cli.db",
        "--no-traces",
        "--json",
    )
    assert result.exit_code in (0, 1), result.output
    [stored] = json.loads(result.stdout)["runs"]
    assert stored["pass_rate"] == pytest.approx(run.pass_rate)
    assert [stored["low"], stored["high"]] == pytest.approx([run.interval.low, run.interval.high])
    assert stored["interval"] == run.interval.method


def test_evaluate_runs_inside_a_running_event_loop(
    suite: harness.Suite, agent: harness.Agent, tmp_path: Path
) -> None:
    """As in a notebook: the loop is busy, so the work runs on a thread of its own."""

    async def in_a_notebook() -> harness.RunResult:
        return harness.evaluate(suite, agent, store=tmp_path / "r.db", judge_model=JUDGE_MODEL)

    run = asyncio.run(in_a_notebook())
    awaited = asyncio.run(
        harness.evaluate_async(suite, agent, store=tmp_path / "r.db", judge_model=JUDGE_MODEL)
    )
    assert run.run_id != awaited.run_id
    assert run.pass_rate == awaited.pass_rate  # same seeds, same scripted models


def test_compare_and_gate_decide_on_api_runs(
    suite: harness.Suite, agent: harness.Agent, tmp_path: Path
) -> None:
    store = tmp_path / "r.db"
    careful = harness.load_agent(ROOT / "agents/support-careful.yaml", set=[AGENT_MODEL])
    base = harness.evaluate(suite, agent, trials=2, store=store, judge_model=JUDGE_MODEL)
    candidate = harness.evaluate(suite, careful, trials=2, store=store, judge_model=JUDGE_MODEL)
    ab = harness.compare(base, candidate)
    assert ab.a.run_id == base.run_id and ab.b.run_id == candidate.run_id
    assert ab.tasks.tasks == len(suite)
    decision = harness.gate(candidate, base, config=ROOT / "ci/gate.yaml")
    assert isinstance(decision.passed, bool)


def test_a_run_eval_loads_each_thing_once(
    tmp_path: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One variant load, one domain resolution per domain, one store open per command; and one
    suite build with the per-command memo switched off (nothing asks twice)."""
    import harness.domains.trace_replay as env_module
    import harness.pipeline.nodes.simulate as simulate
    import harness.sim.suite as suite_module
    import harness.sim.taskset as taskset
    import harness.specs.located as located
    from harness.store import Store

    domains = {case.task.domain for case in harness.load_suite(ROOT / "tasks/support").cases}
    counts: collections.Counter[str] = collections.Counter()

    def counted(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return function(*args, **kwargs)

        return call

    monkeypatch.setattr(simulate, "load_agent", counted("variant", simulate.load_agent))
    monkeypatch.setattr(
        suite_module, "resolve_domain", counted("domain", suite_module.resolve_domain)
    )
    monkeypatch.setattr(env_module, "resolve_domain", counted("domain", env_module.resolve_domain))
    monkeypatch.setattr(Store, "__init__", counted("store", Store.__init__))
    monkeypatch.setattr(taskset, "_task_set", counted("suite", taskset._task_set))
    monkeypatch.setattr(located, "command_memo", lambda: None)
    result = cli(
        "run-eval",
        "--tasks",
        ROOT / "tasks/support",
        "--agent",
        ROOT / "agents/support-baseline.yaml",
        "--set",
        SCRIPTED,
        "--judge-model",
        JUDGE,
        "--store",
        tmp_path / "r.db",
        "--no-traces",
    )
    assert result.exit_code in (0, 1), result.output
    assert counts == {"variant": 1, "domain": len(domains), "store": 1, "suite": 1}

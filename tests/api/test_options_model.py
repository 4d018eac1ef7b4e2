"""Issue 39: every option of the library API and of the command line is checked by one pydantic
model per entry point (`harness.options`), the same rules for both: booleans are booleans,
counts are in their documented range, the executor is a known one. A bad value is one line and
exit 2 on the command line, `BadOptions` (a `ValueError` naming the option) in Python, before
anything is played or written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import harness
import harness.api
from harness.api import BadOptions, EvalOptions
from harness.defaults import MAX_CONCURRENCY, MAX_TRIALS
from harness.options import (
    EXECUTORS,
    CompareOptions,
    GateOptions,
    RuntimeOptions,
    SelectionOptions,
    checked,
)
from tests.conftest import ROOT, SCRIPTED

AGENT_MODEL = SCRIPTED.removeprefix("agent.")


@pytest.fixture(scope="module")
def suite() -> harness.Suite:
    return harness.load_suite(ROOT / "tasks/support", tags=["refunds"], limit=1)


@pytest.fixture(scope="module")
def agent() -> harness.Agent:
    return harness.load_agent(ROOT / "agents/support-baseline.yaml", set=[AGENT_MODEL])


@pytest.mark.parametrize(
    ("options", "line"),
    [
        (
            {"unsafe_checkers": "false"},
            "evaluate: unsafe_checkers: expected True or False (a bool), got 'false'",
        ),
        (
            {"unsafe_checkers": "no"},
            "evaluate: unsafe_checkers: expected True or False (a bool), got 'no'",
        ),
        (
            {"unsafe_checkers": "0"},
            "evaluate: unsafe_checkers: expected True or False (a bool), got '0'",
        ),
        (
            {"unsafe_checkers": 1},
            "evaluate: unsafe_checkers: expected True or False (a bool), got 1",
        ),
        ({"trials": 10**12}, f"evaluate: trials: expected 1 to 10,000, got {10**12}"),
        ({"trials": -1}, "evaluate: trials: expected 1 to 10,000, got -1"),
        ({"trials": 0}, "evaluate: trials: expected 1 to 10,000, got 0"),
        ({"trials": True}, "evaluate: trials: expected an integer 1 to 10,000, got True"),
        ({"trials": "3"}, "evaluate: trials: expected an integer 1 to 10,000, got '3'"),
        ({"concurrency": 0}, "evaluate: concurrency: expected 1 to 10,000, got 0"),
        ({"executor": "dask"}, "evaluate: executor: expected one of local, ray, got 'dask'"),
        ({"workers": 0}, "evaluate: workers: expected 1 or more, got 0"),
        ({"progress": "yes"}, "evaluate: progress: expected True or False (a bool), got 'yes'"),
    ],
)
def test_evaluate_refuses_bad_options_before_anything_is_stored(
    suite: harness.Suite, agent: harness.Agent, tmp_path: Path, options: dict, line: str
) -> None:
    store = tmp_path / "results.db"
    with pytest.raises(BadOptions) as raised:
        harness.evaluate(suite, agent, store=store, **options)
    assert str(raised.value) == line
    assert isinstance(raised.value, ValueError)
    assert not store.exists()  # nothing played, nothing stored
    assert len(list(tmp_path.iterdir())) == 0


def test_evaluate_refuses_an_unknown_option(suite: harness.Suite, agent: harness.Agent) -> None:
    with pytest.raises(TypeError):  # a misspelt keyword stays a TypeError, as in Python
        harness.evaluate(suite, agent, trial=3)
    with pytest.raises(BadOptions, match="trial: unknown option"):
        checked(EvalOptions, "evaluate", trial=3)


def test_evaluate_async_checks_the_same_rules(suite: harness.Suite, agent: harness.Agent) -> None:
    import asyncio

    with pytest.raises(BadOptions, match="unsafe_checkers: expected True or False"):
        asyncio.run(harness.evaluate_async(suite, agent, unsafe_checkers="false"))


def test_valid_calls_still_work(suite: harness.Suite, agent: harness.Agent, tmp_path: Path) -> None:
    import numpy as np

    run = harness.evaluate(
        suite,
        agent,
        trials=np.int64(1),  # a NumPy integer is an integer
        concurrency=2,
        store=str(tmp_path / "r.db"),
        executor="local",
        unsafe_checkers=False,
        progress=None,
        judge_model={"id": "scripted", "script": str(ROOT / "agents/scripts/judge.yaml")},
    )
    assert len(run.episodes) == len(suite)
    runtime = harness.api.open_runtime(cache=None, timeout_s=5, retries=0)
    runtime.close()


@pytest.mark.parametrize(
    ("call", "line"),
    [
        (
            lambda: harness.load_suite(ROOT / "tasks/support", seed=-1),
            "load_suite: seed: expected 0 or more, got -1",
        ),
        (
            lambda: harness.load_suite(ROOT / "tasks/support", sample=0),
            "load_suite: sample: expected 1 or more, got 0",
        ),
        (
            lambda: harness.api.open_runtime(timeout_s=float("nan")),
            "open_runtime: timeout_s: expected a number 0.01 to 86,400, got nan",
        ),
        (
            lambda: harness.api.open_runtime(retries=-1),
            "open_runtime: retries: expected 0 to 100, got -1",
        ),
        (
            lambda: harness.compare("a", "b", max_error_rate=2.0),
            "compare: max_error_rate: expected a number 0 to 1, got 2.0",
        ),
        (
            lambda: harness.gate("a", "b", play="false"),
            "gate: play: expected True or False (a bool), got 'false'",
        ),
        (
            lambda: harness.gate("a", "b", allow_suite_change="no"),
            "gate: allow_suite_change: expected True or False (a bool), got 'no'",
        ),
    ],
)
def test_every_api_function_checks_its_options(call: Callable[[], Any], line: str) -> None:
    with pytest.raises(BadOptions) as raised:
        call()
    assert str(raised.value) == line


def test_the_models_document_every_option() -> None:
    for model in (EvalOptions, RuntimeOptions, SelectionOptions, GateOptions, CompareOptions):
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name}"
    assert EvalOptions.model_fields["trials"].metadata  # the documented range
    assert checked(EvalOptions, "x", trials=MAX_TRIALS, concurrency=MAX_CONCURRENCY).trials
    from harness.engine.executors import EXECUTORS as ENGINE_EXECUTORS

    assert tuple(EXECUTORS) == tuple(ENGINE_EXECUTORS)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--trials", "-1"], "harness: --trials: expected 1 to 10,000, got -1"),
        (["--trials", str(10**12)], f"harness: --trials: expected 1 to 10,000, got {10**12}"),
        (["--concurrency", "0"], "harness: --concurrency: expected 1 to 10,000, got 0"),
        (["--seed", "-1"], "harness: --seed: expected 0 or more, got -1"),
        (["--timeout", "nan"], "harness: --timeout: expected a number 0.01 to 86,400, got nan"),
        (["--retries", "-1"], "harness: --retries: expected 0 to 100, got -1"),
        (["--executor", "dask"], "harness: --executor: expected one of local, ray, got 'dask'"),
        (["--workers", "0"], "harness: --workers: expected 1 or more, got 0"),
    ],
)
def test_run_eval_refuses_the_values_the_api_refuses(
    cli: Callable[..., Any], tmp_path: Path, args: list[str], line: str
) -> None:
    store = tmp_path / "results.db"
    result = cli(
        "run-eval",
        "--tasks",
        ROOT / "tasks/support",
        "--agent",
        ROOT / "agents/support-baseline.yaml",
        "--store",
        store,
        *args,
    )
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [line]
    assert not store.exists()


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["compare", "--max-error-rate", "nan"], "expected a number 0 to 1, got nan"),
        (["compare", "--max-error-rate", "1.5"], "expected a number 0 to 1, got 1.5"),
        (["personas", "from-traces", "--seed", "-1"], "--seed: expected 0 or more, got -1"),
        (["fidelity", "run-x", "--seed", "-1"], "--seed: expected 0 or more, got -1"),
        (["fidelity", "run-x", "--bootstrap", "5"], "--bootstrap: expected 100 to 100,000, got 5"),
        (["climb", "x.yaml", "--executor", "Ray"], "--executor: expected one of local, ray"),
        (["tasks", "list", "tasks/support", "--seed", "-3"], "--seed: expected 0 or more, got -3"),
        (
            ["tasks", "list", "tasks/support", "--sample", "0"],
            "--sample: expected 1 or more, got 0",
        ),
        (
            ["tasks", "list", "tasks/support", "--limit", "-2"],
            "--limit: expected 1 or more, got -2",
        ),
        (["grade", "run-x", "--concurrency", "0"], "--concurrency: expected 1 to 10,000, got 0"),
        (["grade", "run-x", "--retries", "101"], "--retries: expected 0 to 100, got 101"),
    ],
)
def test_every_command_refuses_out_of_range_options(
    cli: Callable[..., Any], args: list[str], line: str
) -> None:
    result = cli(*args)
    assert result.exit_code == 2
    [printed] = result.stderr.splitlines()
    assert line in printed and "Traceback" not in printed

"""Issue 40: the library API as guarded as the command line, and typed. `harness.evaluate`,
`evaluate_async`, `compare` and `gate` take paths or objects and refuse anything else in one
line naming the argument; `evaluate`'s options are keyword arguments an editor sees; a scripted
judge whose rules file does not exist is refused before anything is played; `overrides=` is
`set=` without shadowing the builtin; the gate shows every rule in a notebook."""

from __future__ import annotations

import asyncio
import html
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import harness
from harness.api import BadOptions
from harness.gate import EvidenceRound, GateResult, RuleCheck
from harness.gate.html import gate_html
from harness.specs.agent import ModelRef
from tests.conftest import ROOT, SCRIPTED

AGENT_MODEL = SCRIPTED.removeprefix("agent.")  # "model={id: scripted, ...}"
AGENT_FILE = ROOT / "agents/support-baseline.yaml"
JUDGE_MODEL = {"id": "scripted", "script": str(ROOT / "agents/scripts/judge.yaml")}
TASK = ROOT / "tasks/support/refund-outside-window.yaml"
MISSING = "missing-judge.yaml"


@pytest.fixture(scope="module")
def suite() -> harness.Suite:
    return harness.load_suite(TASK)


@pytest.fixture(scope="module")
def agent() -> harness.Agent:
    return harness.load_agent(AGENT_FILE, overrides=[AGENT_MODEL])


@pytest.fixture(scope="module")
def agent_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An agent file that plays offline with no override: the baseline, scripted."""
    path = tmp_path_factory.mktemp("agents") / "scripted.yaml"
    script = ROOT / "agents/scripts/support.yaml"
    path.write_text(
        f"kind: agent\nname: support-scripted\nextends: {AGENT_FILE}\n"
        f"model: {{id: scripted, script: {script}}}\n"
    )
    return path


@pytest.fixture(scope="module")
def runs(
    suite: harness.Suite, agent: harness.Agent, tmp_path_factory: pytest.TempPathFactory
) -> tuple[harness.RunResult, harness.RunResult]:
    """A baseline and a candidate run of the same task, in one store."""
    store = tmp_path_factory.mktemp("runs") / "r.db"
    careful = harness.load_agent(ROOT / "agents/support-careful.yaml", [AGENT_MODEL])
    base = harness.evaluate(suite, agent, trials=2, store=store, judge_model=JUDGE_MODEL)
    candidate = harness.evaluate(suite, careful, trials=2, store=store, judge_model=JUDGE_MODEL)
    return base, candidate


def test_evaluate_takes_paths_as_well_as_objects(
    suite: harness.Suite, agent_file: Path, tmp_path: Path
) -> None:
    store = tmp_path / "r.db"
    loaded = harness.load_agent(agent_file)
    by_objects = harness.evaluate(suite, loaded, store=store, judge_model=JUDGE_MODEL)
    by_str = harness.evaluate(str(TASK), str(agent_file), store=store, judge_model=JUDGE_MODEL)
    by_list = harness.evaluate([TASK], agent_file, store=store, judge_model=JUDGE_MODEL)
    awaited = asyncio.run(
        harness.evaluate_async(TASK, agent_file, store=store, judge_model=JUDGE_MODEL)
    )
    for run in (by_str, by_list, awaited):
        assert run.variant == by_objects.variant == "support-scripted"
        assert run.pass_rate == by_objects.pass_rate
        assert [e.task_id for e in run.episodes] == [e.task_id for e in by_objects.episodes]


def test_compare_and_gate_take_run_ids_as_well_as_runs(
    runs: tuple[harness.RunResult, harness.RunResult],
) -> None:
    base, candidate = runs
    by_runs = harness.compare(base, candidate)
    by_ids = harness.compare(base.run_id, candidate.run_id, store=base.store)
    assert by_ids.model_dump() == by_runs.model_dump()
    config = ROOT / "ci/gate.yaml"
    decision = harness.gate(candidate.run_id, base.run_id, config=str(config), store=base.store)
    again = harness.gate(candidate, base, config=config, candidate_agent=None)
    assert isinstance(decision, GateResult)
    assert decision.status == again.status
    assert [rule.rule for rule in decision.rules] == [rule.rule for rule in again.rules]


@pytest.mark.parametrize(
    ("call", "where", "name"),
    [
        (lambda s, a: harness.evaluate(42, a), "evaluate", "suite"),
        (lambda s, a: harness.evaluate([], a), "evaluate", "suite"),
        (lambda s, a: harness.evaluate([TASK, 3], a), "evaluate", "suite"),
        (lambda s, a: harness.evaluate(s, 3.5), "evaluate", "agent"),
        (lambda s, a: harness.evaluate(s, None), "evaluate", "agent"),
        (lambda s, a: harness.evaluate(s, a, judge_model=7), "evaluate", "judge_model"),
        (lambda s, a: asyncio.run(harness.evaluate_async(s, {"x": 1})), "evaluate", "agent"),
        (lambda s, a: harness.compare(1, "b"), "compare", "run_a"),
        (lambda s, a: harness.compare("a", None), "compare", "run_b"),
        (lambda s, a: harness.compare("a", "b", judge_model=1.0), "compare", "judge_model"),
        (lambda s, a: harness.gate(object(), "b"), "gate", "candidate"),
        (lambda s, a: harness.gate("a", 3), "gate", "baseline"),
        (lambda s, a: harness.gate("a", "b", config=5), "gate", "config"),
        (lambda s, a: harness.gate("a", "b", candidate_agent=5), "gate", "candidate_agent"),
        (lambda s, a: harness.gate("a", "b", baseline_agent=s), "gate", "baseline_agent"),
        (lambda s, a: harness.load_suite(42), "load_suite", "paths"),
        (lambda s, a: harness.load_suite(TASK, set="title=x"), "load_suite", "set"),
        (lambda s, a: harness.load_suite(TASK, overrides=[1]), "load_suite", "overrides"),
        (lambda s, a: harness.load_agent(42), "load_agent", "path"),
        (lambda s, a: harness.load_agent(AGENT_FILE, overrides="x=1"), "load_agent", "overrides"),
    ],
)
def test_an_argument_of_the_wrong_kind_is_one_line_naming_it(
    suite: harness.Suite,
    agent: harness.Agent,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    call: Callable[[harness.Suite, harness.Agent], Any],
    where: str,
    name: str,
) -> None:
    monkeypatch.chdir(tmp_path)  # nothing may be written: not the default store either
    with pytest.raises(BadOptions) as raised:
        call(suite, agent)
    assert isinstance(raised.value, TypeError) and isinstance(raised.value, ValueError)
    [line] = str(raised.value).splitlines()
    assert line.startswith(f"{where}: {name}: expected "), line
    assert "got " in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "judge", [{"id": "scripted", "script": MISSING}, ModelRef(id="scripted", script=MISSING)]
)
def test_a_missing_judge_script_is_refused_before_anything_is_played(
    suite: harness.Suite,
    agent: harness.Agent,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    judge: Any,
) -> None:
    monkeypatch.chdir(tmp_path)
    line = f"evaluate: judge_model.script: file not found: {MISSING}"
    with pytest.raises(BadOptions) as raised:
        harness.evaluate(suite, agent, store="r.db", judge_model=judge)
    assert str(raised.value) == line
    with pytest.raises(BadOptions, match=r"judge_model\.script: file not found"):
        asyncio.run(harness.evaluate_async(suite, agent, store="r.db", judge_model=judge))
    with pytest.raises(BadOptions) as raised:
        harness.compare("a", "b", store="r.db", judge_model=judge)
    assert str(raised.value) == f"compare: judge_model.script: file not found: {MISSING}"
    assert list(tmp_path.iterdir()) == []  # nothing played, nothing stored


def test_the_project_files_missing_judge_script_is_refused_too(
    suite: harness.Suite, agent: harness.Agent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "harness.yaml").write_text(f"judge_model: {{id: scripted, script: {MISSING}}}\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadOptions) as raised:
        harness.evaluate(suite, agent, store="r.db")
    [line] = str(raised.value).splitlines()
    assert line == f"harness.yaml: judge_model.script: file not found: {tmp_path / MISSING}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["harness.yaml"]


def test_the_command_line_refuses_a_missing_judge_script(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    store = tmp_path / "r.db"
    result = cli(
        "run-eval",
        "--tasks",
        TASK,
        "--agent",
        AGENT_FILE,
        "--set",
        SCRIPTED,
        "--judge-model",
        f"{{id: scripted, script: {MISSING}}}",
        "--store",
        store,
        "--no-traces",
    )
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.endswith(f"script: file not found: {MISSING}")
    assert not store.exists()


def test_evaluate_names_its_options() -> None:
    """No `**options`: an editor and a type checker see every option, the same as
    `evaluate_async`'s, each typed."""
    sync, awaited = inspect.signature(harness.evaluate), inspect.signature(harness.evaluate_async)
    kinds = {param.kind for param in sync.parameters.values()}
    assert inspect.Parameter.VAR_KEYWORD not in kinds
    assert inspect.Parameter.VAR_POSITIONAL not in kinds
    assert list(sync.parameters) == list(awaited.parameters)
    for name, param in sync.parameters.items():
        assert param.default == awaited.parameters[name].default, name
        assert param.annotation == awaited.parameters[name].annotation, name
    hints = typing.get_type_hints(harness.evaluate)
    assert set(hints) == {*sync.parameters, "return"}
    assert hints["trials"] is int and hints["return"] is harness.RunResult
    options = [n for n, p in sync.parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    assert set(options) == set(harness.api.EvalOptions.model_fields)


def test_overrides_is_set_without_shadowing_the_builtin() -> None:
    by_set = harness.load_agent(AGENT_FILE, set=[AGENT_MODEL])
    positional = harness.load_agent(AGENT_FILE, [AGENT_MODEL])
    by_overrides = harness.load_agent(AGENT_FILE, overrides=[AGENT_MODEL])
    assert by_set.content_hash == positional.content_hash == by_overrides.content_hash
    assert by_overrides.overrides == (AGENT_MODEL,)
    plain = harness.load_suite(TASK)
    tasks_set = harness.load_suite(TASK, set=["title=Changed"])
    tasks_overrides = harness.load_suite(TASK, overrides=["title=Changed"])
    assert tasks_set.content_hash == tasks_overrides.content_hash != plain.content_hash
    assert tasks_overrides.cases[0].task.title == "Changed"
    for call in (
        lambda: harness.load_agent(AGENT_FILE, set=[AGENT_MODEL], overrides=[AGENT_MODEL]),
        lambda: harness.load_suite(TASK, set=["title=a"], overrides=["title=b"]),
    ):
        with pytest.raises(BadOptions, match=r"^load_\w+: overrides: give overrides= or"):
            call()


@pytest.mark.parametrize(
    ("flags", "call"),
    [
        (["--trials", "0"], lambda s, a: harness.evaluate(s, a, trials=0)),
        (["--trials", "-1"], lambda s, a: harness.evaluate(s, a, trials=-1)),
        (["--trials", str(10**12)], lambda s, a: harness.evaluate(s, a, trials=10**12)),
        (["--concurrency", "0"], lambda s, a: harness.evaluate(s, a, concurrency=0)),
        (["--executor", "dask"], lambda s, a: harness.evaluate(s, a, executor="dask")),
        (["--workers", "0"], lambda s, a: harness.evaluate(s, a, workers=0)),
        (["--timeout", "nan"], lambda s, a: harness.api.open_runtime(timeout_s=float("nan"))),
        (["--retries", "-1"], lambda s, a: harness.api.open_runtime(retries=-1)),
        (["--seed", "-1"], lambda s, a: harness.load_suite(TASK, seed=-1)),
        (["--sample", "0"], lambda s, a: harness.load_suite(TASK, sample=0)),
        (["--limit", "0"], lambda s, a: harness.load_suite(TASK, limit=0)),
        (
            ["--judge-model", f"{{id: scripted, script: {MISSING}}}"],
            lambda s, a: harness.evaluate(s, a, judge_model={"id": "scripted", "script": MISSING}),
        ),
    ],
)
def test_the_api_refuses_what_run_eval_refuses_in_the_same_words(
    suite: harness.Suite,
    agent: harness.Agent,
    cli: Callable[..., Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    flags: list[str],
    call: Callable[[harness.Suite, harness.Agent], Any],
) -> None:
    """Each value `harness run-eval` refuses, the API refuses: one line naming the argument
    (the flag without dashes), saying the same of it."""
    monkeypatch.chdir(tmp_path)
    result = cli("run-eval", "--tasks", TASK, "--agent", AGENT_FILE, "--no-traces", *flags)
    assert result.exit_code == 2
    [printed] = result.stderr.splitlines()
    with pytest.raises(BadOptions) as raised:
        call(suite, agent)
    [line] = str(raised.value).splitlines()
    option = flags[0].removeprefix("--").replace("-", "_")
    name = {"timeout": "timeout_s", "judge_model": "judge_model.script"}.get(option, option)
    assert f": {name}: " in line, line
    assert printed.endswith(line.split(f": {name}: ", 1)[1]), (printed, line)
    assert list(tmp_path.iterdir()) == []


def test_the_api_refuses_a_string_for_a_boolean(
    suite: harness.Suite, agent: harness.Agent, tmp_path: Path
) -> None:
    """The command line's `--unsafe-checkers` is a flag; the API's a bool, never the string."""
    with pytest.raises(BadOptions) as raised:
        harness.evaluate(suite, agent, store=tmp_path / "r.db", unsafe_checkers="false")
    assert str(raised.value) == (
        "evaluate: unsafe_checkers: expected True or False (a bool), got 'false'"
    )
    assert not (tmp_path / "r.db").exists()


def test_the_gate_shows_every_rule_its_figures_and_the_evidence(
    runs: tuple[harness.RunResult, harness.RunResult],
) -> None:
    base, candidate = runs
    decision = harness.gate(candidate, base, config=ROOT / "ci/gate.yaml")
    shown = decision._repr_html_()
    assert shown.startswith(f"<b>gate {decision.headline}</b>")
    assert decision.rules
    for rule in decision.rules:
        assert html.escape(rule.rule) in shown
    verdicts = {"pass": "PASS", "fail": "FAIL", "undecided": "UNDECIDED"}
    assert shown.count("<tr><td>") >= len(decision.rules)
    for status in {rule.status for rule in decision.rules}:
        assert f"<b>{verdicts[status]}</b>" in shown
    assert "evidence played" in shown
    # every value escaped; rounds of evidence shown with their runs, episodes and why
    marked = decision.model_copy(
        update={
            "status": "undecided",
            "rules": [
                RuleCheck(rule="<tag> & co", passed=True, detail="1 < 2", p_value=0.0123),
                RuleCheck(rule="errors", passed=False, status="undecided", detail="few"),
            ],
            "evidence": [
                EvidenceRound(
                    round=1,
                    candidate_run="run-<c>",
                    candidate_episodes=3,
                    why={"refund-<x>": ["replay"]},
                )
            ],
        }
    )
    shown = gate_html(marked)
    assert "gate UNDECIDED" in shown
    assert "&lt;tag&gt; &amp; co" in shown and "<tag>" not in shown
    assert "1 &lt; 2" in shown and "0.0123" in shown
    assert "<b>PASS</b>" in shown and "<b>UNDECIDED</b>" in shown
    assert "run-&lt;c&gt;" in shown and "<td>3</td>" in shown
    assert "refund-&lt;x&gt;: replay" in shown

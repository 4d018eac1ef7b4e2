"""Validation that knows every reference, where the bad-input corpus does not fit: state paths
against state models, command-line values, `--set` on a node of the flag form, checks an agent
cannot observe, and the domain's code in the task set's cache key."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from harness.grading.checks import CheckContext, run_check
from harness.imports import defined_names
from harness.sim.suite import load_cases
from harness.sim.taskset import content_hash
from harness.specs.state_paths import key_path, unknown_state_field
from harness.testing.fake_server import FakeServer
from harness.transcript import Message, ToolCall
from tests.conftest import JUDGE
from tests.sim.test_simulation import case, play, variant

FLAGS = ("run-eval", "--tasks", "tasks/support", "--agent", "agents/support-baseline.yaml")


def run_eval_fails(cli, tmp_path: Path, *args: str) -> list[str]:
    """Run a pipeline command that must refuse its input: its stderr lines, the store untouched."""
    store = tmp_path / "results.db"
    result = cli(*args, "--store", store)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert not store.exists(), "bad input must not create or touch the results store"
    return result.stderr.splitlines()


# ------------------------------------------------------------------ state paths


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sku: str
    qty: int = 1


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")
    note: str = ""


class State(BaseModel):
    model_config = ConfigDict(extra="forbid")
    orders: dict[str, list[Item]] = {}
    best: Item | None = None
    either: Item | Loose | None = None
    anything: Any = None
    loose: Loose = Loose()


@pytest.mark.parametrize(
    "path",
    [
        "$.orders",
        "$.orders['O-1'][0].sku",
        "$.orders.*[*].qty",
        "$.orders['O-1'][?sku = 'A'].qty",
        "$.orders['O-1'][0:2].sku",
        "$.best.sku",
        "$.either.whatever",  # a union of models: cannot tell which
        "$.anything.at.all",
        "$.loose.extra_field",  # the model allows extra fields
        "$..skuu",  # descendants: not followed
        "$.best.sku.deeper",  # below a scalar: not followed
    ],
)
def test_paths_the_state_model_allows_or_cannot_rule_out_are_accepted(path: str) -> None:
    assert unknown_state_field(State, path) is None


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("$.ordrs", "unknown state field 'ordrs'; did you mean 'orders'?"),
        ("$.orders['O-1'][0].skuu", "unknown state field 'skuu'; did you mean 'sku'?"),
        ("$.orders.*[?sku = 'A'].price", "unknown state field 'price'; expected one of: sku, qty"),
        ("$.best.qtty", "unknown state field 'qtty'; did you mean 'qty'?"),
        ("$.ordrs..sku", "unknown state field 'ordrs'; did you mean 'orders'?"),
    ],
)
def test_a_field_the_state_model_lacks_is_named_with_a_hint(path: str, message: str) -> None:
    assert unknown_state_field(State, path) == message


def test_expectation_keys_become_paths_that_read_back() -> None:
    assert key_path(("orders", "O-1", 0, "sku")) == "$.orders['O-1'][0].sku"
    assert key_path(("where", "it's")) == "$['where']['it\\'s']"
    assert unknown_state_field(State, key_path(("orders", "O-1", 0, "sku")) or "") is None


def test_a_typo_in_a_nested_key_is_reported_once_at_the_outermost_key(cli, workspace: Path) -> None:
    task = workspace / "tasks" / "support" / "cancel-processing.yaml"
    task.write_text(task.read_text().replace("orders: {O-1005:", "ordres: {O-1005:"))
    result = cli("validate", task)
    assert result.exit_code == 2
    [line] = [x for x in result.stderr.splitlines() if "unknown state field" in x]
    assert line.endswith(
        "cancel-processing.yaml:18:7: checks[0].expect.ordres: unknown state field 'ordres'; "
        "did you mean 'orders'?"
    )


# ------------------------------------------------------------------ code read, never run


def test_definitions_are_read_without_running_the_code() -> None:
    source = (
        "import os\nraise SystemExit('never run')\n"
        "try:\n    from fast import respond\nexcept ImportError:\n    respond = None\n"
        "def helper():\n    inner = 1\n"
    )
    assert defined_names(source) == {"os", "respond", "helper"}
    assert defined_names("from tools import *\n") is None  # cannot tell: accepted
    with pytest.raises(SyntaxError):
        defined_names("return 1\n")


def test_an_entry_defined_by_assignment_or_import_validates(cli, tmp_path: Path) -> None:
    (tmp_path / "bot.py").write_text("from json import dumps as respond\nraise SystemExit(3)\n")
    (tmp_path / "bot.yaml").write_text(
        "kind: agent\nname: bot\nrunner: python\nentry: bot.py:respond\n"
    )
    assert cli("validate", tmp_path / "bot.yaml").exit_code == 0


# ------------------------------------------------------------------ command-line values


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        (
            "--judge-model",
            "{id: openai/gpt-4.1-mini, base_url: ",
            "--judge-model {id: openai/gpt-4.1-mini, base_url: : invalid YAML mapping: expected "
            "the node content, but found '<stream end>' (column 37 of the value)",
        ),
        (
            "--set",
            "agent.model={id: scripted, script: a: b}",
            "--set agent.model={id: scripted, script: a: b}: invalid YAML mapping: expected ',' "
            "or '}', but got ':' (column 25 of the value)",
        ),
        (
            "--set",
            "agent.tools=[get_order, issue_refund",
            "--set agent.tools=[get_order, issue_refund: invalid YAML list: expected ',' or ']', "
            "but got '<stream end>' (column 25 of the value)",
        ),
        (
            "--set",
            "simulate.trails=3",
            "--set simulate.trails=3: nodes.simulate.with.trails: unknown field 'trails'; "
            "did you mean 'trials'?",
        ),
    ],
)
def test_bad_command_line_values_are_one_line_naming_the_option(
    cli, tmp_path: Path, option: str, value: str, message: str
) -> None:
    assert run_eval_fails(cli, tmp_path, *FLAGS, option, value) == [message]


def test_a_node_parameter_typo_reads_the_same_with_flags_as_with_a_dag_file(
    cli, tmp_path: Path
) -> None:
    with_flags = run_eval_fails(cli, tmp_path, *FLAGS, "--set", "simulate.trails=3")
    with_dag = run_eval_fails(
        cli, tmp_path, "run-eval", "dags/nightly.yaml", "--set", "simulate.trails=3"
    )
    assert with_flags == with_dag
    compare = ("compare", "--tasks", "tasks/support", "--a", "agents/support-baseline.yaml")
    compare += ("--b", "agents/support-careful.yaml", "--set", "a.trails=3")
    assert run_eval_fails(cli, tmp_path, *compare) == [
        "--set a.trails=3: nodes.a.with.trails: unknown field 'trails'; did you mean 'trials'?"
    ]


def test_a_well_formed_mapping_and_a_plain_string_still_parse(cli, tmp_path: Path) -> None:
    from harness.cli._common import parse_model_option
    from harness.specs.agent import ModelRef
    from harness.specs.overrides import Override

    judge = parse_model_option("--judge-model", JUDGE)
    assert judge is not None and judge.id == "scripted"
    assert parse_model_option("--judge-model", "openai/gpt-4.1-mini") == ModelRef(
        id="openai/gpt-4.1-mini"
    )
    assert Override.parse("agent.name=@bot").value == "@bot"  # not YAML, not a mapping: text


# ------------------------------------------------------------------ what an agent can show


def http_agent(folder: Path, *extra: str) -> Path:
    path = folder / "service.yaml"
    lines = [
        "kind: agent",
        "name: service",
        "runner: http",
        "model: {id: openai/service, base_url: 'http://127.0.0.1:9/v1'}",
        *extra,
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_checks_an_http_agent_cannot_observe_are_refused_before_anything_runs(
    cli, tmp_path: Path
) -> None:
    task = "tasks/support/cancel-processing.yaml"
    lines = run_eval_fails(
        cli, tmp_path, "run-eval", "--tasks", task, "--agent", http_agent(tmp_path)
    )
    advice = (
        "and agent 'service' (runner http) reports none; have it return the calls it ran as its "
        "reply's `tool_calls` and set `reports_tool_calls: true`, or drop the check"
    )
    assert lines == [
        f"{task}:15:5: checks[0]: this state check reads the final state, which only the "
        f"agent's tool calls change, {advice}",
        f"{task}:19:5: checks[1]: this tool_called check reads the agent's tool calls, {advice}",
    ]


def test_validating_a_dag_checks_each_agent_against_its_tasks(cli, tmp_path: Path) -> None:
    dag = tmp_path / "dag.yaml"
    dag.write_text(
        "kind: dag\nname: service\nnodes:\n"
        "  tasks: {uses: load_tasks, with: {paths: [tasks/support/cancel-processing.yaml]}}\n"
        f"  simulate: {{uses: simulate, needs: [tasks], with: {{agent: {http_agent(tmp_path)}}}}}\n"
    )
    result = cli("validate", dag)
    assert result.exit_code == 2
    assert [line.split(": ")[1] for line in result.stderr.splitlines()[:-1]] == [
        "checks[0]",
        "checks[1]",
    ]
    http_agent(tmp_path, "reports_tool_calls: true")
    assert cli("validate", dag).exit_code == 0


def test_reports_tool_calls_is_only_for_the_http_runner(cli, tmp_path: Path) -> None:
    path = tmp_path / "bot.yaml"
    path.write_text(
        "kind: agent\nname: bot\nmodel: openai/gpt-4.1-mini\nsystem_prompt: Hi.\n"
        "reports_tool_calls: true\n"
    )
    result = cli("validate", path)
    assert result.exit_code == 2
    assert "reports_tool_calls is for runner 'http'" in result.stderr


def test_tool_calls_an_http_agent_reports_are_recorded_replayed_and_graded(
    tmp_path: Path,
) -> None:
    cancel = ToolCall(
        id="svc-1", name="cancel_order", arguments={"order_id": "O-1005", "reason": "by mistake"}
    )

    async def service(messages: list[Message]) -> Message:
        return Message(
            role="assistant",
            content="Order O-1005 is cancelled. Is there anything else?",
            tool_calls=[cancel],
        )

    task = case("cancel-processing")
    with FakeServer(responder=service).running() as server:
        agent = variant(
            "support-python",
            "runner=http",
            "entry=null",
            "reports_tool_calls=true",
            f"model={{id: openai/service, base_url: {server.url}/v1}}",
        )
        transcript = play(task, agent)
        sent = server.requests[-1]["messages"]
    assert transcript.error is None
    assert transcript.tool_calls() == [cancel]
    assert transcript.final_state["orders"]["O-1005"]["status"] == "cancelled"
    assert all(m["role"] in ("user", "assistant") and m["content"] for m in sent)
    results = [
        asyncio.run(run_check(check, transcript, CheckContext(task.task)))
        for check in task.task.checks
    ]
    assert [r.outcome for r in results] == ["pass", "pass"]


# ------------------------------------------------------------------ the domain's code is content


def test_editing_a_domain_file_changes_the_task_set_hash(tmp_path: Path) -> None:
    domain = tmp_path / "desk.py"
    domain.write_text(
        "from harness.domains import Environment, tool\n\n"
        "class Desk(Environment):\n"
        "    @tool\n"
        "    def ping(self, name: str) -> str:\n"
        '        """Answer a ping."""\n'
        '        return f"pong {name}"\n'
    )
    (tmp_path / "t.yaml").write_text(
        "kind: task\nid: t\ntitle: ping\nlevel: 1\ndomain: desk.py:Desk\n"
        "persona: {name: p, model: scripted, scripted_turns: [{reply: 'bye ###STOP###'}]}\n"
        "scenario: {reason: ping}\nchecks:\n  - {kind: tool_called, tool: ping}\n"
    )
    before = content_hash(load_cases([tmp_path / "t.yaml"]))
    assert content_hash(load_cases([tmp_path / "t.yaml"])) == before
    domain.write_text(domain.read_text().replace('f"pong {name}"', 'f"PONG {name}"'))
    assert content_hash(load_cases([tmp_path / "t.yaml"])) != before

"""Issue "A new user's first hour": mistakes that used to pass `harness validate` and exit 0 are
refused up front, each as one line naming the file, the field and what was expected, exit 2,
nothing written; and a run whose every episode errored never exits 0. Mistakes one file shows
are in the bad-input corpus (judge-script-missing, persona-script-missing,
tool-args-unknown-parameter, state-expect-wrong-value, state-file-bad-value); these need more
than one file, the command line, or a run."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from harness.domains import Environment, ToolUnavailable, tool
from harness.specs.state_paths import wrong_state_values
from tests.conftest import SCRIPTED

SUPPORT = ("--tasks", "tasks/support", "--agent", "agents/support-baseline.yaml")
NO_DESK = "{id: scripted, script: judge/aiiii.yaml}"


def refused(cli, tmp_path: Path, *args: str) -> list[str]:
    """Run a command that must refuse its input: its stderr lines; no store was created."""
    store = tmp_path / "results.db"
    result = cli(*args, "--store", store)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert not store.exists(), "bad input must not create or touch the results store"
    return result.stderr.splitlines()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ------------------------------------------------------------------ 1. scripted model files


def test_a_judge_model_option_naming_no_file_is_refused(cli, tmp_path: Path) -> None:
    lines = refused(
        cli, tmp_path, "run-eval", *SUPPORT, "--set", SCRIPTED, "--judge-model", NO_DESK
    )
    assert lines == [f"--judge-model {NO_DESK}: script: file not found: judge/aiiii.yaml"]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "agent.model={id: scripted, script: agents/scripts/nope.yaml}",
            "model.script: file not found: agents/scripts/nope.yaml",
        ),
        (
            "persona.model={id: scripted, script: personas/nope.yaml}",
            "model.script: file not found: personas/nope.yaml",
        ),
    ],
)
def test_a_scripted_model_set_on_the_command_line_naming_no_file_is_refused(
    cli, tmp_path: Path, override: str, message: str
) -> None:
    lines = refused(cli, tmp_path, "run-eval", *SUPPORT, "--set", override)
    assert lines == [f"--set {override}: {message}"]


def test_a_dag_judge_naming_no_file_is_refused_at_its_line(cli, tmp_path: Path) -> None:
    dag = Path("dags/demo.yaml").read_text().replace("scripts/judge.yaml", "scripts/judg.yaml")
    path = write(tmp_path / "demo.yaml", dag)
    result = cli("validate", path)
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if "judg.yaml" in line]
    assert [line.split(": ", 1)[1] for line in errors] == [
        "nodes.grade_production.with.judge_model.script: file not found: agents/scripts/judg.yaml",
        "nodes.grade_candidate.with.judge_model.script: file not found: agents/scripts/judg.yaml",
    ]
    line = dag.splitlines().index("    needs: [production]") + 2  # the grade node's `with:`
    assert errors[0].startswith(f"{path}:{line}:40: ")


# ------------------------------------------------------------------ 4. an agent's tools


def test_agent_tools_are_checked_through_a_seed_env_node(cli, workspace: Path) -> None:
    """A simulate node fed by seed_env (not load_tasks itself) is checked before the run."""
    agent = write(
        workspace / "agents" / "typo.yaml",
        "kind: agent\nname: typo\nextends: support-baseline.yaml\n"
        "tools: [get_order, cancel_reservation]\n",
    )
    tasks = workspace / "tasks" / "support"
    dag = write(
        workspace / "seeded.yaml",
        "kind: dag\nname: seeded\nnodes:\n"
        f"  tasks: {{uses: load_tasks, with: {{paths: ['{tasks}']}}}}\n"
        f"  seeded: {{uses: seed_env, needs: [tasks], with: {{data: '{tasks}/data/desk.json'}}}}\n"
        f"  simulate: {{uses: simulate, needs: [seeded], with: {{agent: '{agent}'}}}}\n",
    )
    message = (
        f"{agent}:4:20: tools[1]: unknown tool 'cancel_reservation' in domain 'support'; "
        "known: cancel_order, find_customer, get_order, issue_refund, list_orders, "
        "transfer_to_human, update_address"
    )
    checked = cli("validate", dag)
    assert checked.exit_code == 2
    assert checked.stderr.splitlines() == [message, "0 valid, 1 invalid"]
    assert refused(cli, workspace, "run-eval", dag) == [message]


# ------------------------------------------------------------------ 5. duplicate task ids


def test_two_task_files_with_one_id_are_refused_naming_both(cli, workspace: Path) -> None:
    suite = workspace / "tasks" / "support"
    shutil.copy(suite / "order-status.yaml", suite / "order-status-copy.yaml")
    first, second = (f"{suite}/order-status-copy.yaml", f"{suite}/order-status.yaml")
    message = f"{second}:2:1: id: duplicate task id 'order-status' (also in {first}:2:1)"
    result = cli("validate", suite)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [message, "22 valid, 1 invalid"]
    agent = workspace / "agents" / "support-baseline.yaml"
    assert refused(cli, workspace, "run-eval", "--tasks", suite, "--agent", agent) == [message]


# ------------------------------------------------------------------ 6. a shared state file


def test_a_bad_value_in_a_shared_state_file_is_one_line_at_its_json_position(
    cli, workspace: Path
) -> None:
    desk = workspace / "tasks" / "support" / "data" / "desk.json"
    desk.write_text(desk.read_text().replace('"status": "delivered"', '"status": "delivred"', 1))
    message = (
        f"{desk}:28:7: start.state.orders.O-1001.status: Input should be 'processing', 'shipped', "
        "'delivered', 'cancelled' or 'refunded', found 'delivred'"
    )
    result = cli("validate", workspace / "tasks" / "support")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [message, "3 valid, 19 invalid"]
    tasks, agent = workspace / "tasks" / "support", workspace / "agents" / "support-baseline.yaml"
    assert refused(cli, workspace, "run-eval", "--tasks", tasks, "--agent", agent) == [message]


# ------------------------------------------------------------------ 3. expected state values


class Line(BaseModel):
    sku: str
    qty: int = 1


class Shop(BaseModel):
    status: Literal["open", "closed"] = "open"
    rating: float = 0.0
    count: int = 0
    lines: list[Line] = []
    notes: dict[str, Any] = {}


@pytest.mark.parametrize(
    "expected",
    [
        {"status": "open"},
        {"rating": 4},  # an int equals the float the state holds
        {"count": 3.0},  # compares equal at run time
        {"lines": [{"sku": "A"}]},  # the default is the model's to fill
        {"notes": {"anything": ["goes"]}},
    ],
)
def test_values_the_state_can_hold_are_accepted(expected: dict[str, Any]) -> None:
    assert wrong_state_values(Shop, "$", expected) == []


@pytest.mark.parametrize(
    ("path", "expected", "wrong"),
    [
        (
            "$",
            {"status": "shut"},
            [(("status",), "Input should be 'open' or 'closed', found 'shut'")],
        ),
        ("$", {"rating": "4.5"}, [(("rating",), "Input should be a valid number, found '4.5'")]),
        ("$", {"count": True}, [(("count",), "Input should be a valid integer, found True")]),
        ("$", {"lines": [{"qty": 2}]}, [(("lines", 0, "sku"), "required field is missing")]),
        ("$.lines[0].qty", "2", [((), "Input should be a valid integer, found '2'")]),
    ],
)
def test_values_the_state_can_never_hold_are_named(
    path: str, expected: Any, wrong: list[tuple[tuple[str | int, ...], str]]
) -> None:
    assert wrong_state_values(Shop, path, expected) == wrong


# ------------------------------------------------------------------ 7. every episode errored


class DownDesk(Environment):
    """A desk whose back end is down."""

    domain = "down-desk"

    @tool
    def lookup(self, order_id: str) -> dict[str, Any]:
        """Look an order up."""
        raise ToolUnavailable("order service refused the connection")


def write_down_desk(tmp_path: Path, agent_model: str) -> tuple[Path, Path]:
    """Two tasks on the down desk, and an agent that calls its tool (with `agent_model`)."""
    for name in ("first", "second"):
        write(
            tmp_path / "tasks" / f"{name}.yaml",
            f"kind: task\nid: {name}\ntitle: back end down\nlevel: 1\n"
            f"domain: {__name__}:DownDesk\n"
            "persona: {name: p, model: scripted, scripted_turns: [{reply: 'thanks ###STOP###'}]}\n"
            "scenario: {reason: order status}\nstart: {first_message: 'Where is O-1?'}\n"
            "checks:\n  - {kind: tool_called, tool: lookup}\n",
        )
    write(
        tmp_path / "script.yaml",
        "kind: script\nrules:\n  - reply: {tool_calls: [{name: lookup, arguments: {order_id: O-1}}]}\n",
    )
    agent = write(
        tmp_path / "agent.yaml",
        "kind: agent\nname: desk\nsystem_prompt: You help with orders.\n"
        f"model: {agent_model}\ntools: [lookup]\n",
    )
    return tmp_path / "tasks", agent


@pytest.mark.parametrize(
    ("agent_model", "sides", "code", "why"),
    [
        (
            "{id: scripted, script: script.yaml}",
            "tool 2",
            3,
            "the harness or what it runs on (the agent's model provider, tools, user simulator, "
            "judge) failed, not the agent",
        ),
        (  # the llm agent's provider refused every call: missing evidence, not the agent's fail
            "{id: openai/desk, base_url: 'http://127.0.0.1:9/v1'}",  # nothing listens there
            "agent_model 2",
            3,
            "the harness or what it runs on (the agent's model provider, tools, user simulator, "
            "judge) failed, not the agent",
        ),
    ],
)
def test_a_run_whose_every_episode_errored_never_exits_0(
    cli, tmp_path: Path, agent_model: str, sides: str, code: int, why: str
) -> None:
    tasks, agent = write_down_desk(tmp_path, agent_model)
    args = ("run-eval", "--tasks", tasks, "--agent", agent, "--no-traces", "--retries", "0")
    result = cli(*args, "--store", tmp_path / "results.db", "--no-cache")
    assert result.exit_code == code, result.output
    [line] = [line for line in result.stdout.splitlines() if "every episode errored" in line]
    assert line.endswith(f": every episode errored ({sides}), none graded: {why} (exit {code})")
    assert "pass rate n/a (0/0" in result.stdout

"""Check kinds are registered modules that report what they reference, so that loading and
validation cross-check every kind alike (issue 11)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import TypeAdapter

from harness.sim.suite import load_cases
from harness.sim.taskset import content_hash
from harness.specs.checks import BUILTIN_KINDS, CHECK_KINDS, Check, References

KNOWN = (
    "known: cancel_order, find_customer, get_order, issue_refund, list_orders, "
    "transfer_to_human, update_address"
)
TASK = """\
kind: task
id: {id}
title: A check naming tools
level: 1
domain: support
persona: polite
scenario: {{reason: testing}}
start: {{state_file: data/desk.json}}
checks:
"""


def write_task(folder: Path, name: str, checks: str) -> Path:
    path = folder / "tasks" / "support" / f"{name}.yaml"
    path.write_text(TASK.format(id=name) + checks)
    return path


@pytest.mark.parametrize(
    ("check", "where", "message"),
    [
        (
            "  - {kind: tool_order, tools: [get_order, refund_everything]}\n",
            "10:43: checks[0].tools[1]",
            "unknown tool 'refund_everything'",
        ),
        (
            "  - kind: json_schema\n    target: tool_arguments\n    tool: wipe_orders\n"
            "    schema: {type: object}\n",
            "12:5: checks[0].tool",
            "unknown tool 'wipe_orders'",
        ),
    ],
    ids=["tool_order", "json_schema"],
)
def test_an_unknown_tool_in_any_check_is_a_located_input_error(
    cli, workspace: Path, check: str, where: str, message: str
) -> None:
    path = write_task(workspace, "unknown-tool", check)
    result = cli("validate", path)
    assert result.exit_code == 2
    assert f"{path}:{where}: {message}; {KNOWN}" in result.stderr.splitlines()


def test_known_tools_in_every_kind_that_names_tools_validate(cli, workspace: Path) -> None:
    path = write_task(
        workspace,
        "known-tools",
        "  - {kind: tool_order, tools: [find_customer, issue_refund]}\n"
        "  - {kind: tool_called, tool: get_order}\n"
        "  - {kind: json_schema, target: tool_arguments, tool: get_order, schema: {type: object}}\n",
    )
    assert cli("validate", path).exit_code == 0


REFERENCES = {
    "state": (
        {"kind": "state", "expect": {"orders": {}, "refunds": []}},
        References(
            state_paths={("expect", "orders"): "$.orders", ("expect", "refunds"): "$.refunds"},
            state_values={("expect",): ("$", {"orders": {}, "refunds": []})},
        ),
    ),
    "end_state": (
        {"kind": "end_state", "nothing_else_changed": ["$.orders"], "ignore": ["$.today"]},
        References(state_paths={("nothing_else_changed", 0): "$.orders", ("ignore", 0): "$.today"}),
    ),
    "tool_called": (
        {"kind": "tool_called", "tool": "get_order", "args": {"order_id": "O-1"}},
        References(
            tools={("tool",): "get_order"},
            tool_parameters={("args", "order_id"): ("get_order", "order_id")},
            tool_arguments={("args", "order_id"): ("get_order", "order_id", "O-1")},
        ),
    ),
    "tool_order": (
        {"kind": "tool_order", "tools": ["get_order", "issue_refund"]},
        References(tools={("tools", 0): "get_order", ("tools", 1): "issue_refund"}),
    ),
    "text": ({"kind": "text", "contains": "refund"}, References()),
    "json_schema": (
        {
            "kind": "json_schema",
            "target": "tool_arguments",
            "tool": "issue_refund",
            "schema": {"type": "object", "required": ["order_id"]},
        },
        References(
            tools={("tool",): "issue_refund"},
            tool_parameters={("schema", "required", 0): ("issue_refund", "order_id")},
        ),
    ),
    "python": (
        {"kind": "python", "file": "checks/ok.py"},
        References(files={("file",): "checks/ok.py"}),
    ),
    "llm_judge": ({"kind": "llm_judge", "criterion": "The agent is polite."}, References()),
    "no_error": (
        {"kind": "no_error", "tool": "issue_refund", "error": "KeyError"},
        References(tools={("tool",): "issue_refund"}),
    ),
    "no_false_success": (
        {"kind": "no_false_success", "tool": "reset_password"},
        References(tools={("tool",): "reset_password"}),
    ),
}


def test_every_builtin_kind_is_registered_and_covered_here() -> None:
    assert set(CHECK_KINDS.names()) >= set(BUILTIN_KINDS)
    assert set(REFERENCES) == set(BUILTIN_KINDS)


@pytest.mark.parametrize("kind", BUILTIN_KINDS)
def test_every_builtin_kind_reports_its_references(kind: str) -> None:
    data, expected = REFERENCES[kind]
    assert TypeAdapter(Check).validate_python(data).references() == expected


def test_state_path_checks_reference_their_path() -> None:
    check = TypeAdapter(Check).validate_python(
        {"kind": "state", "path": "$.refunds", "exists": True}
    )
    assert check.references() == References(state_paths={("path",): "$.refunds"})


def test_the_task_set_hash_covers_every_referenced_file(workspace: Path) -> None:
    checker = workspace / "tasks" / "support" / "checks" / "address_confirmed.py"
    task = workspace / "tasks" / "support" / "address-change.yaml"
    before = content_hash(load_cases([task]))
    checker.write_text(checker.read_text() + "\n# changed\n")
    assert content_hash(load_cases([task])) != before

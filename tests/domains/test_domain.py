"""The support-desk domain: tool schemas from type hints, policy enforced by the environment."""

from __future__ import annotations

import asyncio
import json

import pytest

from harness.domains import get_domain
from harness.specs.references import read_json
from tests.conftest import ROOT

DESK = read_json(ROOT / "tasks/support/data/desk.json")


@pytest.fixture
def desk():
    return get_domain("support")(DESK)


def call(env, name: str, **arguments):
    outcome = asyncio.run(env.call(name, arguments))
    return outcome.is_error, (outcome.content if outcome.is_error else json.loads(outcome.content))


def test_tool_parameters_come_from_type_hints() -> None:
    specs = {spec.name: spec for spec in get_domain("support").tool_specs()}
    assert set(specs) == {
        "find_customer",
        "list_orders",
        "get_order",
        "issue_refund",
        "cancel_order",
        "update_address",
        "transfer_to_human",
    }
    refund = specs["issue_refund"].parameters
    assert refund["properties"] == {"order_id": {"type": "string"}, "reason": {"type": "string"}}
    assert refund["required"] == ["order_id", "reason"]
    assert refund["additionalProperties"] is False
    assert "refund window" in specs["issue_refund"].description


def test_refund_within_window_changes_state(desk) -> None:
    error, result = call(desk, "issue_refund", order_id="O-1001", reason="broken")
    assert not error
    assert result == {
        "refund_id": "R-0001",
        "order_id": "O-1001",
        "amount": 59.0,
        "reason": "broken",
        "status": "refunded",
    }
    assert desk.state["orders"]["O-1001"]["status"] == "refunded"
    error, message = call(desk, "issue_refund", order_id="O-1001", reason="again")
    assert error and message == "Error: order O-1001 is already refunded"


def test_policy_refusals_are_error_results_and_leave_state_alone(desk) -> None:
    assert call(desk, "issue_refund", order_id="O-1004", reason="late") == (
        True,
        "Error: order O-1004 was delivered 80 days ago; window is 30",
    )
    assert call(desk, "cancel_order", order_id="O-1002", reason="x") == (
        True,
        "Error: order O-1002 is shipped; only processing orders",
    )
    assert call(desk, "get_order", order_id="O-9999") == (True, "Error: no order with id 'O-9999'")
    assert desk.state == DESK


def test_bad_arguments_are_reported_to_the_agent_not_raised(desk) -> None:
    error, message = call(desk, "get_order", order="O-1001")
    assert error
    assert message.startswith("Error: invalid arguments for get_order: order_id: Field required")
    assert call(desk, "drop_tables") == (True, "Error: unknown tool 'drop_tables'")


def test_environment_copies_its_start_state(desk) -> None:
    call(desk, "cancel_order", order_id="O-1005", reason="mistake")
    assert desk.state["orders"]["O-1005"]["status"] == "cancelled"
    assert DESK["orders"]["O-1005"]["status"] == "processing"


def test_lookup_and_handoff(desk) -> None:
    assert call(desk, "find_customer", email=" ALAN@example.com") == (
        False,
        {"customer_id": "C-102", "name": "Alan Turing"},
    )
    _, orders = call(desk, "list_orders", customer_id="C-102")
    assert [o["order_id"] for o in orders] == ["O-1003", "O-1006"]
    assert not desk.done
    call(desk, "transfer_to_human", summary="double charge")
    assert desk.done and desk.state["handoffs"] == [{"summary": "double charge"}]

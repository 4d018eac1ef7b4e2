"""tau2's database shared by a suite's episodes (harness_tau2.shared), on tau2's real airline
database: validated once, each episode's a copy-on-access view. What an episode's tools write
stays its own: never in another episode's database, the shared one, or the start state; and its
state is still its database's whole dump, sharing every record it did not change with the start
state."""

from __future__ import annotations

import asyncio
import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, install_package

PLUGIN = ROOT / "integrations" / "harness-tau2"


@pytest.fixture(scope="module")
def airline(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, Any]]:
    """The plug-in's airline domain, and the start state as harness holds it (tau2's database
    validated and dumped)."""
    site = install_package(PLUGIN, tmp_path_factory, "tau2-state")
    sys.path.insert(0, str(site))
    from harness_tau2.domains import DATA, Airline

    assert Airline.State is not None
    state = Airline.State.model_validate_json(Path(DATA["airline"]).read_text())
    return Airline, state.model_dump(mode="json", by_alias=True)


def call(env: Any, name: str, **arguments: Any) -> Any:
    outcome = asyncio.run(env.call(name, arguments))
    assert not outcome.is_error, outcome.content
    return json.loads(outcome.content)


def test_an_episodes_writes_stay_its_own(airline) -> None:
    Airline, start = airline
    before = copy.deepcopy(start)
    reservation = next(r for r in start["reservations"].values() if r["status"] is None)
    rid, user = reservation["reservation_id"], reservation["user_id"]
    one, two = Airline(start), Airline(start)
    call(one, "get_reservation_details", reservation_id=rid)
    call(one, "send_certificate", user_id=user, amount=50)
    assert call(one, "cancel_reservation", reservation_id=rid)["status"] == "cancelled"

    # the episode's state is its database, whole
    assert one.state == one._tau2.tools.db.model_dump(mode="json", by_alias=True)
    assert one.state["reservations"][rid]["status"] == "cancelled"
    assert (
        len(one.state["users"][user]["payment_methods"])
        == len(start["users"][user]["payment_methods"]) + 1
    )
    # ... sharing every record it did not change with the start state
    assert one.state["flights"] is start["flights"]
    assert [
        k for k, r in one.state["reservations"].items() if r is not start["reservations"][k]
    ] == [rid]
    assert [k for k, r in one.state["users"].items() if r is not start["users"][k]] == [user]

    # another episode, running beside it or after it, sees the start
    assert call(two, "get_reservation_details", reservation_id=rid)["status"] is None
    three = Airline(start)
    assert call(three, "get_user_details", user_id=user) == call(
        two, "get_user_details", user_id=user
    )
    assert two.state == three.state == start == before
    assert three._tau2.tools.db.model_dump(mode="json", by_alias=True) == before


def test_a_record_a_tool_changes_while_iterating_is_the_episodes_own(airline) -> None:
    from harness_tau2.shared import View, shared

    Airline, start = airline
    base = shared(Airline.State, start)
    view, other = View(base), View(base)
    flight = next(iter(view.database.flights.values()))  # lent: the shared record
    number, was = flight.flight_number, flight.scheduled_departure_time_est
    flight.scheduled_departure_time_est = "00:01:00"
    taken = view.database.reservations[next(iter(start["reservations"]))]
    view.database.reservations["NEW001"] = taken.model_copy(update={"reservation_id": "NEW001"})
    state = dict(start)
    view.settle(state)

    assert state["flights"][number]["scheduled_departure_time_est"] == "00:01:00"
    assert "NEW001" in state["reservations"]
    assert view.database.flights[number].scheduled_departure_time_est == "00:01:00"
    # the shared database is restored: the other view and a new one see the start
    assert other.database.flights[number].scheduled_departure_time_est == was
    assert View(base).database.flights[number].scheduled_departure_time_est == was
    assert "NEW001" not in base.database.reservations and "NEW001" not in start["reservations"]
    assert start["flights"][number]["scheduled_departure_time_est"] == was

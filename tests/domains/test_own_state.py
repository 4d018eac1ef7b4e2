"""An environment's state is a copy-on-write view of the start state its task shares
(harness.domains.own_state): whatever way a domain's code reaches and changes it (its tools,
its `__init__`, a reference it keeps), the change is its episode's alone, never another
episode's or the shared start state's; the final state, read as stored, shares every part no
code reached with the start state, and `state_changes` finds exactly what changed."""

from __future__ import annotations

import asyncio
import copy
import json
import pickle
from typing import Any

import pytest

from harness.sdk import Environment, tool
from harness.state_diff import apply_changes, state_changes


class Bank(Environment):
    """Tools that change the state every way plain Python code does."""

    description = "Accounts."

    def __init__(self, state: dict[str, Any]):
        super().__init__(state)
        self.state["settings"]["opened"] += 1  # the domain's own set-up changes the state too
        self.log = self.state.setdefault("log", [])  # a reference kept across calls

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        self.state["audit"].append(name)  # outside any tool: still the episode's own
        return await super().call(name, arguments)

    @tool
    def credit(self, account: str, amount: int) -> dict[str, Any]:
        """Credit an account."""
        found = self.state["accounts"][account]
        found["balance"] += amount
        found["history"].append(amount)
        self.log.append(f"credit {account}")
        return found

    @tool
    def rename_all(self, suffix: str, how: str) -> int:
        """Rename every account, reaching them by iteration, by a copy of the mapping or by
        unpacking it."""
        accounts = self.state["accounts"]
        reached = {
            "values": lambda: accounts.values(),
            "items": lambda: [found for _, found in accounts.items()],
            "copy": lambda: dict(accounts).values(),
            "unpacking": lambda: {**accounts}.values(),
            "get": lambda: [accounts.get(key) for key in accounts],
        }[how]()
        for found in reached:
            found["owner"]["name"] += suffix
            found["tags"].append(suffix)
        return len(accounts)

    @tool
    def close_first(self, why: str) -> str:
        """Close the account that sorts first, reached through a list."""
        first = sorted(self.state["queue"], key=lambda item: item["id"])[0]
        first["closed"] = why
        self.state["accounts"].pop(first["id"])
        return first["id"]


def start() -> dict[str, Any]:
    return {
        "accounts": {
            f"A{n}": {"balance": n, "history": [n], "owner": {"name": f"Ada {n}"}, "tags": []}
            for n in range(4)
        },
        "queue": [{"id": "A2"}, {"id": "A1"}],
        "settings": {"opened": 0, "currency": "EUR"},
        "audit": [],
        "untouched": {"big": {"table": list(range(10))}},
    }


def call(env: Environment, name: str, **arguments: Any) -> Any:
    outcome = asyncio.run(env.call(name, arguments))
    assert not outcome.is_error, outcome.content
    return json.loads(outcome.content)


def test_an_episodes_changes_stay_its_own_and_are_found_exactly() -> None:
    shared = start()
    before = copy.deepcopy(shared)
    one, two = Bank(shared), Bank(shared)
    assert call(one, "credit", account="A0", amount=5)["balance"] == 5
    call(one, "credit", account="A0", amount=1)
    assert call(one, "rename_all", suffix="!", how="values") == 4
    assert call(one, "close_first", why="asked") == "A1"

    assert shared == before  # the shared start state is never changed
    assert two.state == {**before, "settings": {"opened": 1, "currency": "EUR"}, "log": []}
    assert call(two, "credit", account="A1", amount=2)["balance"] == 3  # A1 is still there

    expected = copy.deepcopy(before)
    expected["settings"]["opened"] = 1
    expected["log"] = ["credit A0", "credit A0"]  # changed through the reference kept
    expected["audit"] = ["credit", "credit", "rename_all", "close_first"]
    expected["accounts"]["A0"].update(balance=6, history=[0, 5, 1])
    for found in expected["accounts"].values():
        found["owner"]["name"] += "!"
        found["tags"].append("!")
    del expected["accounts"]["A1"]
    expected["queue"][1]["closed"] = "asked"
    assert one.state == expected
    # what no tool reached is the start state's own, and the changes rebuild the final state
    assert dict.__getitem__(one.state, "untouched") is shared["untouched"]  # read as stored
    changes = state_changes(shared, one.state)
    assert apply_changes(shared, changes) == expected
    assert not any(change["path"][0] == "untouched" for change in changes)


@pytest.mark.parametrize("how", ["values", "items", "copy", "unpacking", "get"])
def test_records_reached_every_way_are_copied_first(how: str) -> None:
    shared = start()
    before = copy.deepcopy(shared)
    env = Bank(shared)
    call(env, "rename_all", suffix="?", how=how)
    assert shared == before
    assert [found["owner"]["name"] for found in env.state["accounts"].values()] == [
        f"Ada {n}?" for n in range(4)
    ]


def test_a_copy_or_a_pickle_of_a_state_is_plain_data() -> None:
    env = Bank(start())
    call(env, "credit", account="A3", amount=1)
    for copied in (copy.deepcopy(env.state), pickle.loads(pickle.dumps(env.state))):
        assert type(copied) is dict and type(copied["accounts"]) is dict
        assert copied == env.state
    assert json.loads(json.dumps(env.state)) == env.state

"""Real-size state: a results store grows by what an episode changed, not by the size of the
database the tasks share; the final state is rebuilt exactly from the start state and the
changes; stores written before the changes were kept still read; and `state_changes` /
`apply_changes` are exact inverses on arbitrary edits."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from harness.specs.located import copy_data
from harness.state_diff import apply_changes, state_changes
from harness.store import Store
from tests.conftest import newest_run, run_cli

DOMAIN = """
from harness.sdk import Environment, ToolError, tool


class Ledger(Environment):
    description = "Accounts and their balances."

    @tool
    def credit(self, account: str, amount: int) -> dict:
        \"\"\"Add to an account's balance.\"\"\"
        if account not in self.state["accounts"]:
            raise ToolError(f"no account {account}")
        self.state["accounts"][account]["balance"] += amount
        self.state["accounts"][account]["history"].append(amount)
        return self.state["accounts"][account]
"""
AGENT = """
def respond(conversation, tools):
    account = conversation[-1]["content"].split()[-1]
    if len(conversation) == 1:
        tools.call("credit", account=account, amount=5)
    return f"Credited {account}."
"""
TASKS = 4


def project(folder: Path, accounts: int) -> dict[str, Any]:
    """Tasks sharing one state file of `accounts` accounts (about 300 bytes each); each task
    credits one account. The start state, as written."""
    (folder / "tasks").mkdir(parents=True)
    (folder / "personas").mkdir()
    rng = random.Random(accounts)
    state = {
        "accounts": {
            f"A{n:05d}": {
                "owner": f"Owner {n}",
                "balance": rng.randint(0, 10_000),
                "history": [rng.randint(-500, 500) for _ in range(12)],
                "address": {"street": f"{n} Long Road", "city": "Springfield"},
            }
            for n in range(accounts)
        }
    }
    (folder / "tasks" / "ledger.json").write_text(json.dumps(state))
    (folder / "ledger.py").write_text(DOMAIN)
    (folder / "agent.py").write_text(AGENT)
    (folder / "agent.yaml").write_text(
        "kind: agent\nname: teller\nrunner: python\nentry: agent.py:respond\n"
    )
    (folder / "personas" / "client.yaml").write_text(
        "kind: persona\nname: client\nmodel: scripted\nscripted_turns:\n  - reply: 'Thanks. ###STOP###'\n"
    )
    for n in range(TASKS):
        (folder / "tasks" / f"t{n}.yaml").write_text(
            f"kind: task\nid: credit-{n}\ntitle: Credit an account\nlevel: 1\n"
            "domain: ../ledger.py:Ledger\npersona: client\nscenario: {reason: A credit.}\n"
            f"start: {{state_file: ledger.json, first_message: 'Credit A{n:05d}'}}\n"
            "checks:\n  - kind: end_state\n"
            f"    nothing_else_changed: [\"$.accounts['A{n:05d}']\"]\n"
        )
    return state


def run(folder: Path, store: Path) -> str:
    done = run_cli(
        "run-eval", "--tasks", "tasks", "--agent", "agent.yaml", "--trials", "2",
        "--store", store, "--no-traces", cwd=folder,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return newest_run(store)


@pytest.fixture(scope="module")
def sizes(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, Any]]:
    """Per state size: the start state, the store after two runs of the tasks, the second
    run's id, and what the store holds: start states, and bytes per episode of the run."""
    found = {}
    for accounts in (100, 5_000):
        folder = tmp_path_factory.mktemp(f"ledger{accounts}")
        start = project(folder, accounts)
        store = folder / "results.db"
        run(folder, store)
        run_id = run(folder, store)
        with sqlite3.connect(store) as db:
            states = db.execute("SELECT LENGTH(state) FROM states").fetchall()
            [(per_episode,)] = db.execute(
                "SELECT AVG(LENGTH(transcript) + LENGTH(usage)) FROM episodes WHERE run_id = ?",
                (run_id,),
            ).fetchall()
        found[accounts] = {
            "start": start,
            "store": store,
            "run": run_id,
            "state_bytes": (folder / "tasks" / "ledger.json").stat().st_size,
            "states": [n for (n,) in states],
            "per_episode": per_episode,
        }
    return found


def test_store_growth_per_episode_does_not_follow_the_state_size(sizes) -> None:
    small, big = sizes[100], sizes[5_000]
    assert big["state_bytes"] > 40 * small["state_bytes"]  # a ~1 MB state against ~20 KB
    # the start state is stored once for both runs of the 4 tasks that share it
    assert len(big["states"]) == 1 and big["states"][0] > 0.8 * big["state_bytes"]  # compact JSON
    # each episode changed one account: a few KB in both, not the state's size
    assert big["per_episode"] < 0.01 * big["state_bytes"], big
    assert big["per_episode"] < 1.2 * small["per_episode"], (small, big)


def test_stored_final_states_are_rebuilt_exactly(sizes) -> None:
    case = sizes[5_000]
    store = Store(case["store"])
    try:
        transcripts = [t for t, _, _ in store.transcripts(case["run"])]
        verdicts = {v.task_id: v.outcome for v in store.latest_verdicts(case["run"])}
    finally:
        store.close()
    assert len(transcripts) == TASKS * 2
    for transcript in transcripts:
        account = f"A{int(transcript.task_id.split('-')[1]):05d}"
        expected = copy_data(case["start"])
        expected["accounts"][account]["balance"] += 5
        expected["accounts"][account]["history"].append(5)
        assert transcript.final_state == expected
    assert set(verdicts.values()) == {"pass"}  # nothing else changed, read from the changes
    with sqlite3.connect(case["store"]) as db:
        rows = db.execute("SELECT transcript FROM episodes WHERE run_id = ?", (case["run"],))
        sizes_kept = [len(text) for (text,) in rows]
    assert max(sizes_kept) < 10_000, sizes_kept  # the changes, not the ~1.5 MB state


def test_a_store_holding_whole_final_states_still_reads(sizes) -> None:
    """Rows written before final states were kept as changes hold the whole state."""
    case = sizes[100]
    store = Store(case["store"])
    try:
        [first, *_] = [t for t, _, _ in store.transcripts(case["run"])]
    finally:
        store.close()
    with sqlite3.connect(case["store"]) as db:
        db.execute(
            "UPDATE episodes SET transcript = ? WHERE run_id = ? AND task_id = ? AND trial = ?",
            (first.model_dump_json(), case["run"], first.task_id, first.trial),
        )
    store = Store(case["store"])
    try:
        again = {(t.task_id, t.trial): t for t, _, _ in store.transcripts(case["run"])}
    finally:
        store.close()
    assert again[(first.task_id, first.trial)] == first


def edited(state: Any, rng: random.Random, depth: int = 0) -> Any:
    """A copy of `state` with random edits: values changed, keys added and removed, lists
    grown, shrunk and retyped."""
    if isinstance(state, dict):
        found = {
            k: edited(v, rng, depth + 1) if rng.random() < 0.3 else v for k, v in state.items()
        }
        if found and rng.random() < 0.2:
            found.pop(rng.choice(list(found)))
        if rng.random() < 0.2:
            found[f"new{rng.randint(0, 99)}"] = {"x": [1, 2]}
        return found
    if isinstance(state, list):
        found = [edited(v, rng, depth + 1) if rng.random() < 0.3 else v for v in state]
        roll = rng.random()
        if roll < 0.2:
            found.append(rng.randint(0, 9))
        elif roll < 0.35 and found:
            found.pop()
        return found
    return rng.choice([state, rng.randint(0, 9), "text", None, 1.5, True, [state]])


@pytest.mark.parametrize("seed", range(40))
def test_changes_applied_to_the_start_give_the_final_state(seed: int) -> None:
    rng = random.Random(seed)
    start = {
        "a": {"b": [1, 2, {"c": 3}], "d": "x"},
        "e": [[1], [2, 3]],
        "f": 1,
        "g": {"h": {"i": None}},
    }
    kept = copy_data(start)
    final = edited(start, rng)
    changes = state_changes(start, final)
    rebuilt = apply_changes(start, json.loads(json.dumps(changes)))  # as stored
    assert rebuilt == final and json.dumps(rebuilt) == json.dumps(final)
    assert start == kept  # the start state, shared by every episode, is never changed
    assert (changes == []) == (json.dumps(final) == json.dumps(start))

"""Exact end states: `end_state` compares the whole final state (given, the gold actions
replayed, or the start state changed only under listed paths) and names each difference by its
path; `end.require` fails an episode that did not end as the task requires; text checks can
normalise case, commas and whitespace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.grading.checks.end_state import differences
from harness.sim.suite import load_cases
from tests.conftest import ROOT, run_cli

DESK = ROOT / "tasks/support/data/desk.json"
ADDRESS = {"street": "1 New Road", "city": "Leeds", "zip": "LS1 1AA", "country": "GB"}


# ---- the agents: python agents that make the calls a real agent might


def cancels(conversation: list[dict], tools: Any) -> str:
    """Cancels O-1003 as asked, and says so with the amount."""
    if len(conversation) == 1:
        tools.call("cancel_order", order_id="O-1003", reason="customer asked")
    return "Done: order O-1003 is cancelled, a refund of $1,089.90 follows. ###STOP###"


def cancels_and_moves(conversation: list[dict], tools: Any) -> str:
    """Cancels O-1003, and also changes O-1005's address that nobody asked about."""
    if len(conversation) == 1:
        tools.call("cancel_order", order_id="O-1003", reason="customer asked")
        tools.call("update_address", order_id="O-1005", **ADDRESS)
    return "Done: order O-1003 is cancelled. ###STOP###"


def cancels_the_wrong_order(conversation: list[dict], tools: Any) -> str:
    if len(conversation) == 1:
        tools.call("cancel_order", order_id="O-1005", reason="customer asked")
    return "Done. ###STOP###"


def chats(conversation: list[dict], tools: Any) -> str:
    return "Let me check on that for you."


def task(folder: Path, checks: list[dict], **extra: Any) -> Path:
    spec = {
        "kind": "task",
        "id": "cancel",
        "title": "Cancel a processing order",
        "level": 1,
        "domain": "support",
        "persona": {
            "name": "asker",
            "scripted_turns": [{"reply": "Thanks. ###STOP###"}],
        },
        "scenario": {"reason": "You want to cancel order O-1003."},
        "start": {"state_file": str(DESK), "first_message": "Please cancel order O-1003."},
        "end": {"max_turns": 3},
        "checks": checks,
        **extra,
    }
    path = folder / "task.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def verdict(folder: Path, path: Path, agent: str, codes: tuple[int, ...] = (0, 1)) -> dict:
    """Run the task once with the python agent `agent` of this module; its verdict."""
    variant = folder / "agent.yaml"
    variant.write_text(
        f"kind: agent\nname: {agent}\nrunner: python\nentry: tests.grading.test_end_state:{agent}\n"
    )
    store = folder / f"{agent}-{len(list(folder.glob('*.db')))}.db"
    done = run_cli("run-eval", "--tasks", path, "--agent", variant, "--store", store,
                   "--no-traces", "--json")  # fmt: skip
    assert done.returncode in codes, done.stderr
    from harness.store import Store

    opened = Store(store)
    [run] = opened.runs()
    [found] = list(opened.latest_verdicts(run.id))
    opened.close()
    return found.model_dump(mode="json")


def by_name(found: dict) -> dict[str, dict]:
    return {c["name"]: c for c in found["checks"]}


NOTHING_ELSE = {
    "kind": "end_state",
    "name": "nothing else changed",
    "nothing_else_changed": ["$.orders['O-1003'].status"],
}


def test_an_extra_write_fails_nothing_else_changed_naming_the_path(tmp_path: Path) -> None:
    path = task(tmp_path, [NOTHING_ELSE])
    assert verdict(tmp_path, path, "cancels")["outcome"] == "pass"
    found = verdict(tmp_path, path, "cancels_and_moves")
    assert found["outcome"] == "fail"
    reason = by_name(found)["nothing else changed"]["reason"]
    assert reason.startswith("the final state changed outside the allowed paths: ")
    assert "$.orders['O-1005'].shipping_address.street: was '" in reason
    assert "now '1 New Road'" in reason
    assert "O-1003" not in reason  # the allowed change


def test_gold_actions_replayed_are_the_expected_state(tmp_path: Path) -> None:
    gold = [{"tool": "cancel_order", "arguments": {"order_id": "O-1003", "reason": "asked"}}]
    path = task(tmp_path, [{"kind": "end_state", "name": "gold", "gold": True}], gold_actions=gold)
    assert verdict(tmp_path, path, "cancels")["outcome"] == "pass"
    found = by_name(verdict(tmp_path, path, "cancels_the_wrong_order"))["gold"]
    assert found["outcome"] == "fail"
    assert "$.orders['O-1003'].status: expected 'cancelled', found 'processing'" in found["reason"]
    assert "$.orders['O-1005'].status: expected 'processing', found 'cancelled'" in found["reason"]
    assert found["reason"].startswith("the final state differs from the gold state")
    extra = by_name(verdict(tmp_path, path, "cancels_and_moves"))["gold"]
    assert extra["outcome"] == "fail" and "O-1005'].shipping_address" in extra["reason"]
    ignoring = task(tmp_path, [{"kind": "end_state", "name": "gold", "gold": True,
                                "ignore": ["$.orders['O-1005'].shipping_address"]}],
                    gold_actions=gold)  # fmt: skip
    assert verdict(tmp_path, ignoring, "cancels_and_moves")["outcome"] == "pass"


def test_a_refused_gold_action_is_an_error_of_the_task_not_a_fail(tmp_path: Path) -> None:
    gold = [{"tool": "cancel_order", "arguments": {"order_id": "O-1001", "reason": "x"}}]
    path = task(tmp_path, [{"kind": "end_state", "gold": True}], gold_actions=gold)
    found = verdict(tmp_path, path, "cancels", codes=(3,))  # every episode errored: exit 3
    assert found["outcome"] == "error"
    assert (
        "gold action 1 (cancel_order) was refused: Error: order O-1001 is delivered"
        in (found["checks"][0]["reason"])
    )


def test_refused_gold_actions_may_be_skipped(tmp_path: Path) -> None:
    """A reference conversation with a refused call in it (tau-bench's gold: a wrong id tried
    first): `refused_gold: skip` replays the rest."""
    gold = [
        {"tool": "cancel_order", "arguments": {"order_id": "O-1001", "reason": "x"}},
        {"tool": "cancel_order", "arguments": {"order_id": "O-1003", "reason": "asked"}},
    ]
    check = {"kind": "end_state", "name": "gold", "gold": True, "refused_gold": "skip"}
    path = task(tmp_path, [check], gold_actions=gold)
    assert verdict(tmp_path, path, "cancels")["outcome"] == "pass"
    found = by_name(verdict(tmp_path, path, "chats"))["gold"]
    assert found["outcome"] == "fail"
    assert "$.orders['O-1003'].status: expected 'cancelled', found 'processing'" in found["reason"]


def test_equals_names_each_difference_by_its_path(tmp_path: Path) -> None:
    state = json.loads(DESK.read_text())
    state["orders"]["O-1003"]["status"] = "cancelled"
    state["orders"]["O-1003"]["tracking"] = "1Z-NEW"
    state["handoffs"] = [{"summary": "x"}]
    path = task(tmp_path, [{"kind": "end_state", "name": "exact", "equals": state}])
    reason = by_name(verdict(tmp_path, path, "cancels"))["exact"]["reason"]
    assert reason == (
        "the final state differs from the expected state: $.orders['O-1003'].tracking: expected "
        "'1Z-NEW', found None; $.handoffs[0]: missing (expected {'summary': 'x'})"
    )  # the defaults the domain's State model fills in are no difference


def test_differences_of_mappings_lists_and_numbers() -> None:
    found = dict(differences({"a": 1, "l": [1, 2]}, {"a": 1.0, "b": 2, "l": [1]}))
    assert found == {("b",): "added (2)", ("l", 1): "missing (expected 2)"}
    assert dict(differences({"a": True}, {"a": 1})) == {("a",): "expected True, found 1"}


def test_bad_end_state_checks_are_located(tmp_path: Path) -> None:
    both = task(tmp_path, [{"kind": "end_state", "gold": True, "nothing_else_changed": []}])
    done = run_cli("validate", both)
    assert done.returncode == 2 and "give exactly one of 'equals', 'gold: true'" in done.stderr
    unknown = task(tmp_path, [NOTHING_ELSE], gold_actions=[{"tool": "refund_all"}])
    done = run_cli("validate", unknown)
    assert done.returncode == 2
    assert "gold_actions[0].tool: unknown tool 'refund_all'" in done.stderr, done.stderr
    wrong = task(tmp_path, [NOTHING_ELSE],
                 gold_actions=[{"tool": "cancel_order", "arguments": {"order": "O-1003"}}])  # fmt: skip
    done = run_cli("validate", wrong)
    assert done.returncode == 2 and "gold_actions[0].arguments.order" in done.stderr, done.stderr


def test_end_require_fails_an_episode_that_hit_the_turn_limit(tmp_path: Path) -> None:
    checks = [{"kind": "text", "contains": "check"}]
    never_ends = {"name": "patient", "scripted_turns": [{"reply": "And?"}]}
    path = task(tmp_path, checks, persona=never_ends)
    assert verdict(tmp_path, path, "chats")["outcome"] == "pass"  # no requirement: as before
    data = yaml.safe_load(path.read_text())
    data["end"]["require"] = ["stop"]
    path.write_text(yaml.safe_dump(data))
    found = verdict(tmp_path, path, "chats")
    assert found["outcome"] == "fail"
    assert by_name(found)["end"]["reason"] == "the episode ended with max_turns; required: stop"
    data["persona"] = {"name": "asker", "scripted_turns": [{"reply": "Thanks. ###STOP###"}]}
    path.write_text(yaml.safe_dump(data))
    assert verdict(tmp_path, path, "chats")["outcome"] == "pass"


@pytest.mark.parametrize(
    ("normalize", "outcome"), [([], "fail"), (["commas"], "pass"), (["case", "commas"], "pass")]
)
def test_text_checks_normalise_commas(tmp_path: Path, normalize: list, outcome: str) -> None:
    check = {"kind": "text", "contains": "1089.90", "ignore_case": False}
    if normalize:
        check["normalize"] = normalize
    path = task(tmp_path, [check])
    assert verdict(tmp_path, path, "cancels")["outcome"] == outcome


def test_tasks_without_the_new_fields_keep_their_content_hash(tmp_path: Path) -> None:
    from harness.sim.taskset import task_content

    path = task(tmp_path, [{"kind": "text", "contains": "done"}])
    [case] = load_cases([path])
    content = json.loads(task_content(case))[0]
    assert "gold_actions" not in content and "require" not in content["end"]
    assert "normalize" not in content["checks"][0]

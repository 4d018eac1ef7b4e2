"""Python agents that play tau2-bench tasks from their gold solution, right and wrong, for
tests/integrations/test_tau2.py. The user's first message names the task (`task <tau2 id>`); `gold.json`
beside this file holds each task's gold actions (with which of them write) and the information
the agent must communicate. Each agent replays the gold, except where its name says.

- `oracle`: every gold action, then says every piece of required information;
- `skip_last_write`: leaves out the last gold action that writes;
- `change_argument`: the last write with an argument changed (its first id, which the tool then
  refuses, else its first whole number, one more);
- `extra_write`: the gold, then an unrequested write (a $50 certificate to the task's user, when
  the task names one);
- `silent`: the gold actions, but never the required information.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from harness.sdk import ToolError

GOLD: dict[str, dict[str, Any]] = json.loads((Path(__file__).parent / "gold.json").read_text())


def _task(conversation: list[dict[str, Any]]) -> dict[str, Any]:
    first = next(m["content"] for m in conversation if m["role"] == "user")
    return GOLD[first.removeprefix("task ").strip()]


def _play(tools: Any, actions: list[dict[str, Any]]) -> None:
    for action in actions:
        with contextlib.suppress(ToolError):  # a refused call is part of the trajectory
            tools.call(action["name"], **action["arguments"])


def _say(task: dict[str, Any], communicate: bool) -> str:
    told = " ".join(f"Please note: {info}." for info in task["communicate"]) if communicate else ""
    return f"All done. {told} Is there anything else I can help with?".replace("  ", " ")


def _replied(conversation: list[dict[str, Any]]) -> bool:
    return any(m["role"] == "assistant" and m.get("content") for m in conversation[1:])


def oracle(conversation: list[dict[str, Any]], tools: Any) -> str:
    task = _task(conversation)
    if not _replied(conversation):
        _play(tools, task["actions"])
    return _say(task, communicate=True)


def skip_last_write(conversation: list[dict[str, Any]], tools: Any) -> str:
    task = _task(conversation)
    writes = [n for n, a in enumerate(task["actions"]) if a["write"]]
    if not _replied(conversation):
        _play(tools, [a for n, a in enumerate(task["actions"]) if not writes or n != writes[-1]])
    return _say(task, communicate=True)


def change_argument(conversation: list[dict[str, Any]], tools: Any) -> str:
    task = _task(conversation)
    actions = [dict(a) for a in task["actions"]]
    writes = [n for n, a in enumerate(actions) if a["write"]]
    if writes:
        last = actions[writes[-1]]
        arguments = dict(last["arguments"])
        ids = sorted(k for k, v in arguments.items() if k.endswith("_id") and isinstance(v, str))
        numbers = sorted(k for k, v in arguments.items() if type(v) is int)
        if ids:
            arguments[ids[0]] += "X"
        elif numbers:
            arguments[numbers[0]] += 1
        last["arguments"] = arguments
    if not _replied(conversation):
        _play(tools, actions)
    return _say(task, communicate=True)


def extra_write(conversation: list[dict[str, Any]], tools: Any) -> str:
    task = _task(conversation)
    if not _replied(conversation):
        _play(tools, task["actions"])
        if task["user_id"] is not None:  # a task that names no user gets no certificate
            _play(tools, [{"name": "send_certificate",
                           "arguments": {"user_id": task["user_id"], "amount": 50}}])  # fmt: skip
    return _say(task, communicate=True)


def silent(conversation: list[dict[str, Any]], tools: Any) -> str:
    task = _task(conversation)
    if not _replied(conversation):
        _play(tools, task["actions"])
    return _say(task, communicate=False)

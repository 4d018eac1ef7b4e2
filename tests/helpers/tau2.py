"""A project of tau2-bench tasks made playable offline, after `harness tau2 import` wrote them:
each first message names its task (the agents' handle on their gold,
`tests/apps/tau2_agents.py`), the simulated user thanks and stops after the agent's answer, and
a scripted judge fails every NL assertion (diagnostic checks: they must not change a verdict).
The plug-in's tests (tests/integrations/test_tau2.py) and `bench/tau2_airline.py` play it."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
JUDGE = "{id: scripted, script: judge.yaml}"


def gold(task: Any, domain: str = "airline") -> dict[str, Any]:
    """What the agents of tests/apps/tau2_agents.py read of a tau2 task: its gold actions (which of
    them write, by tau2's own tool types), the information to communicate, the task's user."""
    from harness_tau2.domains import DOMAINS
    from tau2.environment.toolkit import ToolType

    kit = DOMAINS[domain].toolkit(None)
    criteria = task.evaluation_criteria
    actions = [
        {"name": a.name, "arguments": a.arguments, "write": kit.tool_type(a.name) == ToolType.WRITE}
        for a in criteria.actions or []
    ]
    users = [a["arguments"]["user_id"] for a in actions if "user_id" in a["arguments"]]
    named = re.search(r"user id is (\w+)", task.user_scenario.instructions.known_info or "")
    return {
        "actions": actions,
        "communicate": criteria.communicate_info or [],
        "user_id": users[0] if users else named.group(1) if named else None,
    }


def make_playable(folder: Path, domain: str, agents: Iterable[str]) -> dict[str, Any]:
    """The imported project under `folder` made playable (see the module's doc), with an agent
    file `<agent>.yaml` for each of `agents` (functions of tests/apps/tau2_agents.py); tau2's
    tasks by their harness id."""
    from harness_tau2.convert import task_id, tau2_tasks

    tasks = {task_id(domain, t): t for t in tau2_tasks(domain, "base")}
    for name, task in tasks.items():
        path = folder / "tasks" / f"{name}.yaml"
        data = yaml.safe_load(path.read_text())
        data["start"]["first_message"] = f"task {task.id}"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    (folder / "tasks" / "personas" / "tau2-user.yaml").write_text(
        "kind: persona\nname: tau2-user\nmodel: scripted\n"
        "scripted_turns:\n  - reply: 'Thank you. ###STOP###'\n"
    )
    (folder / "judge.yaml").write_text(
        'kind: script\nrules:\n  - reply: \'{"reasoning": "Scripted.", "passed": false}\'\n'
    )
    (folder / "gold.json").write_text(json.dumps({t.id: gold(t, domain) for t in tasks.values()}))
    shutil.copyfile(ROOT / "tests" / "apps" / "tau2_agents.py", folder / "agents.py")
    for agent in agents:
        (folder / f"{agent}.yaml").write_text(
            f"kind: agent\nname: {agent}\nrunner: python\nentry: agents.py:{agent}\n"
        )
    return tasks

"""tau2-bench tasks as harness tasks, graded as tau2 grades them.

A tau2 task's user scenario becomes the harness scenario (played by the `tau2-user` persona),
its gold actions the task's `gold_actions`, and its evaluation criteria checks, by its reward
basis (tau2's default: the database and the information communicated):
- `DB`: `end_state` with `gold: true` (the final database equals the start database with the
  gold actions replayed through tau2's tools; a gold action tau2's tools refuse, a lookup of an
  email the user got wrong, say, is skipped, as tau2 skips it); with no gold action,
  `nothing_else_changed: []`;
- `COMMUNICATE`: a `text` check per piece of information, matched as tau2 matches it (case
  folded, commas removed, in any agent message);
- `ACTION`: a `tool_called` check per gold action, on the arguments tau2 compares;
- `NL_ASSERTION`: an `llm_judge` check per assertion; outside the reward basis (tau2 does not
  count them by default) they are `diagnostic`: reported, never deciding the verdict.
tau2 scores an episode that did not end with a stop 0: every task has `end.require: [stop]`.
"""

from __future__ import annotations

from typing import Any

from tau2.data_model.tasks import RewardType, StructuredUserInstructions
from tau2.data_model.tasks import Task as Tau2Task

PERSONA = "tau2-user"
MAX_TURNS = 30


class Unsupported(ValueError):
    """A tau2 task that harness cannot play as tau2 does (initialization actions, environment
    assertions, user tools): named, never converted into a task that grades differently."""


def tau2_tasks(domain: str, split: str | None = "base") -> list[Tau2Task]:
    """tau2's own tasks of a domain (`split` None: every task)."""
    from harness_tau2.domains import TASKS

    return TASKS[domain](split)


def task_id(domain: str, task: Tau2Task) -> str:
    return f"tau2-{domain}-{task.id}".replace(" ", "-").replace("_", "-").lower()


def harness_task(domain: str, task: Tau2Task, state_file: str) -> dict[str, Any]:
    """One tau2 task as a harness task file's content, starting from `state_file` (relative to
    the task file)."""
    where = f"tau2 {domain} task {task.id}"
    criteria = task.evaluation_criteria
    start: dict[str, Any] = {"state_file": state_file}
    if task.initial_state is not None:
        if task.initial_state.initialization_actions:
            raise Unsupported(f"{where}: initialization actions are not supported")
        data = task.initial_state.initialization_data
        if data is not None and data.user_data:
            raise Unsupported(f"{where}: a user database (user tools) is not supported")
        if data is not None and data.agent_data:
            start["state"] = data.agent_data
        if task.initial_state.message_history:
            raise Unsupported(f"{where}: a message history is not supported")
    if criteria is not None and criteria.env_assertions:
        raise Unsupported(f"{where}: environment assertions are not supported")
    actions = list(criteria.actions or []) if criteria is not None else []
    if any(a.requestor != "assistant" for a in actions):
        raise Unsupported(f"{where}: gold actions of the user are not supported")
    found: dict[str, Any] = {
        "kind": "task",
        "id": task_id(domain, task),
        "title": _title(task),
        "level": 1,
        "tags": ["tau2", domain],
        "domain": f"tau2-{domain}",
        "persona": PERSONA,
        "scenario": _scenario(task),
        "start": start,
        "end": {"max_turns": MAX_TURNS, "require": ["stop"]},
    }
    if actions:
        found["gold_actions"] = [{"tool": a.name, "arguments": a.arguments} for a in actions]
    found["checks"] = checks(task) or [{"kind": "no_error", "name": "no tool errors"}]
    return found


def checks(task: Tau2Task) -> list[dict[str, Any]]:
    """The checks that grade a task as tau2's evaluator does (see the module's doc)."""
    criteria = task.evaluation_criteria
    if criteria is None:
        return []
    basis = set(criteria.reward_basis)
    found: list[dict[str, Any]] = []
    if basis & {RewardType.DB, RewardType.ENV_ASSERTION} and criteria.actions is not None:
        if criteria.actions:
            found.append({"kind": "end_state", "name": "tau2 DB: the gold database", "gold": True,
                          "refused_gold": "skip"})  # fmt: skip
        else:
            found.append(
                {"kind": "end_state", "name": "tau2 DB: unchanged", "nothing_else_changed": []}
            )
    if RewardType.ACTION in basis:
        for action in criteria.actions or []:
            compared = action.compare_args
            args = action.arguments if compared is None else {
                k: v for k, v in action.arguments.items() if k in compared
            }  # fmt: skip
            found.append({"kind": "tool_called", "name": f"tau2 action {action.action_id}",
                          "tool": action.name, "args": args})  # fmt: skip
    if RewardType.COMMUNICATE in basis:
        for n, info in enumerate(criteria.communicate_info or []):
            found.append({"kind": "text", "name": f"tau2 communicate {n + 1}", "contains": info,
                          "normalize": ["case", "commas"]})  # fmt: skip
    counted = RewardType.NL_ASSERTION in basis
    for n, assertion in enumerate(criteria.nl_assertions or []):
        check = {"kind": "llm_judge", "name": f"tau2 assertion {n + 1}", "criterion": assertion}
        found.append(check if counted else {**check, "diagnostic": True})
    return found


def _title(task: Tau2Task) -> str:
    purpose = task.description.purpose if task.description is not None else None
    text = " ".join((purpose or _instructions(task).reason_for_call or task.id).split())
    return text if len(text) <= 120 else text[:117] + "..."


def _instructions(task: Tau2Task) -> StructuredUserInstructions:
    given = task.user_scenario.instructions
    if isinstance(given, StructuredUserInstructions):
        return given
    return StructuredUserInstructions(
        domain="", reason_for_call=str(given), known_info=None, task_instructions=""
    )


def _scenario(task: Tau2Task) -> dict[str, Any]:
    given = _instructions(task)
    persona = task.user_scenario.persona
    instructions = "\n\n".join(
        text.strip() for text in (persona, given.task_instructions) if text and text.strip()
    )
    found: dict[str, Any] = {"reason": given.reason_for_call.strip()}
    if instructions:
        found["instructions"] = instructions
    if given.known_info and given.known_info.strip():
        found["known_info"] = {"what you know": given.known_info.strip()}
    if given.unknown_info and given.unknown_info.strip():
        found["unknown_info"] = [given.unknown_info.strip()]
    return found


def persona(model: str) -> dict[str, Any]:
    """The simulated user of every converted task: tau2's user simulator's rules, on `model`."""
    return {
        "kind": "persona",
        "name": PERSONA,
        "description": "A customer contacting customer service (tau2-bench's user simulator).",
        "style": "Short, natural messages, one step at a time; gives information only when "
        "it is needed; never invents details the scenario does not give.",
        "patience": MAX_TURNS,
        "model": model,
        "temperature": 0.0,
    }

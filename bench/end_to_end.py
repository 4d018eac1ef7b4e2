"""End to end against the floor: `harness run-eval` (a subprocess, as a user runs it, tracing on
and off) and the bare `openai` client play the same workload against the fake server, in the
same run: 500 tasks x 4 agent turns = 2,000 model calls (find the customer, list the orders, get
the order, answer), the user played by a scripted persona, rule checks only.

For each latency x concurrency setting it prints CPU milliseconds per model call net of
start-up (the run's CPU less the CPU of a run of a one-task suite, over the calls in between:
loading the other 499 tasks counts as work, not start-up; the bare client's less
a one-episode warm-up), the ratio to the bare client, efficiency (ideal time / wall time end to
end, start-up included on both sides; the ideal being calls x latency / concurrency for 4
dependent calls per episode), and peak RSS; then the one-task start-up time (wall time beyond
its 4 model calls), with W&B off and with the run logged to W&B offline (`startup_wandb_s`).
The last line is machine-readable.

One more case plays the same tasks with the user as an LLM persona and an `llm_judge` check,
both models on the fake server (`openai/user-sim` and `openai/judge`): 4 agent calls, one user
simulator call and one judge call per episode, traces off. Its CPU milliseconds per model call
(net of its own one-task start-up, as above) are printed against the bare client's: the user
simulators and judges of every episode and check go through one provider and one SDK client per
model reference (issue 28), as the agent does.

The client is there twice: as users call it (`chat.completions.create`), which the targets are
measured against, and posting the same bodies with `client.post`, the route the harness takes
(`harness/models/openai_provider.py`: it skips `create`'s parameter transform, 40 to 45% of the
client's CPU). Against the second, the ratios are the harness's own cost over the same route.

The harness's modules are compiled first (`compileall`), as an install does: with
PYTHONDONTWRITEBYTECODE set, an editable checkout would otherwise compile them in every run.

Run: python bench/end_to_end.py [tasks]
Targets (issue 42): startup_s <= 1.5; efficiency_200 >= 0.90 and efficiency_200_vs_client >= 0.97
(the bare client's in the same run); cpu_ratio_traced_floor (the traced harness's CPU per call
over the bare client posting the same bodies) <= 1.15. Earlier (issue 18): cpu_ratio_traced
<= 1.5, cpu_ratio_untraced <= 1.2, efficiency_50_vs_client >= 0.8, peak_mib <= 150.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("OPENAI_API_KEY", "bench-not-a-real-key")
SETTINGS = {"50": (0.05, 100), "200": (0.2, 20)}  # latency (s), concurrency
CALLS_PER_EPISODE = 4
LLM_CALLS_PER_EPISODE = CALLS_PER_EPISODE + 2  # and one user simulator call, one judge call
ROUNDS = 3  # interleaved rounds per setting; each figure is their median
CLIENT, CLIENT_POST = "bare openai client", "bare client, post"
LLM_ROLES = "LLM user + judge"
ENV = {
    **os.environ,
    "WANDB_MODE": "disabled",
    "WANDB_DISABLE_WEAVE": "true",
    "WANDB_ERROR_REPORTING": "false",
    "OPENAI_API_KEY": "bench-not-a-real-key",
    "COLUMNS": "200",
}
# The judge and the LLM user simulator are told apart by their system prompts; a rule with
# no `tool` never answers a tool result, so the agent's rules below see what they saw before.
SERVER_SCRIPT = """kind: script
rules:
  - when: {system: impartial evaluator}
    reply: '{"reasoning": "The agent gave the tracking number.", "passed": true}'
  - when: {system: You are playing a user, matches: "(?i)anything else"}
    reply: "No, thank you. ###STOP###"
  - when: {system: You are playing a user}
    reply: Could you look it up please?
  - when: {tool: get_order}
    reply: "Order {result.order_id} is {result.status}; tracking {result.tracking}. Anything else?"
  - when: {tool: list_orders}
    reply: {tool_calls: [{name: get_order, arguments: {order_id: O-1002}}]}
  - when: {tool: find_customer}
    reply: {tool_calls: [{name: list_orders, arguments: {customer_id: "{result.customer_id}"}}]}
  - reply: {tool_calls: [{name: find_customer, arguments: {email: grace@example.com}}]}
"""
PERSONA = """kind: persona
name: brief
description: Says thanks and leaves once answered.
model: scripted
scripted_turns:
  - when: {matches: "(?i)anything else"}
    reply: "No, thank you. ###STOP###"
  - reply: Could you look it up please?
"""
LLM_PERSONA = """kind: persona
name: brief
description: Says thanks and leaves once answered.
model: {id: openai/user-sim, base_url: URL/v1, max_concurrency: 1000}
"""
JUDGE_CHECK = """  - kind: llm_judge
    name: tells where the order is
    criterion: The agent tells the user where the order is, with its tracking number.
"""
AGENT = """kind: agent
name: bench-agent
model: {id: openai/fake, base_url: URL/v1, max_concurrency: 1000}
system_prompt: You are a support agent. Look facts up with the tools.
tools: [find_customer, list_orders, get_order]
parameters: {max_tool_steps: 8}
"""


def task_yaml(index: int, llm: bool = False) -> str:
    """A task of the workload; `llm`: with an `llm_judge` check as well (its persona, of the
    same name, is an LLM in the folder of LLM tasks)."""
    return f"""kind: task
id: status-{index:04d}
title: Where is my order
level: {1 + index % 3}
tags: [orders, bench-{index % 5}]
domain: support
persona: brief
scenario:
  reason: You want to know where order O-1002 is.
  instructions: Ask for the status of order O-1002.
  known_info: {{order_id: O-1002, email: grace@example.com}}
start:
  state_file: data/desk.json
  first_message: Hi, where is my order O-1002? My email is grace@example.com.
end:
  max_turns: 3
checks:
  - kind: tool_called
    tool: get_order
    args: {{order_id: O-1002}}
  - kind: text
    name: gives the tracking number
    contains: 1Z999AA10123456784
""" + (JUDGE_CHECK if llm else "")


def make_workload(folder: Path, tasks: int, url: str) -> None:
    """The suites of the scripted user (`tasks`, `one-task`) and of the LLM user and judge
    (`llm/tasks`, `llm/one-task`, with their persona), and the agent."""
    for base, llm, persona in ((folder, False, PERSONA), (folder / "llm", True, LLM_PERSONA)):
        (base / "tasks/data").mkdir(parents=True)
        shutil.copy(ROOT / "tasks/support/data/desk.json", base / "tasks/data/desk.json")
        for index in range(tasks):
            (base / f"tasks/status-{index:04d}.yaml").write_text(task_yaml(index, llm))
        shutil.copytree(base / "tasks/data", base / "one-task/data")
        (base / "one-task/status-0000.yaml").write_text(task_yaml(0, llm))
        (base / "personas").mkdir()
        (base / "personas/brief.yaml").write_text(persona.replace("URL", url))
    (folder / "agent.yaml").write_text(AGENT.replace("URL", url))


def start_server(folder: Path, latency: float) -> tuple[subprocess.Popen[str], str]:
    script = folder / "server-script.yaml"
    script.write_text(SERVER_SCRIPT)
    command = [sys.executable, "-m", "harness", "fake-server", "--port", "0"]
    command += ["--latency", str(latency), "--script", str(script)]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=ENV)
    assert process.stderr is not None
    url = process.stderr.readline().strip().rsplit(" ", 1)[-1]
    return process, url


def server_requests(url: str) -> int:
    import httpx

    return int(httpx.get(f"{url}/stats").json()["requests"])


def run_harness(
    folder: Path,
    tasks: int,
    concurrency: int,
    traced: bool,
    judge: str | None = None,
    wandb: bool = False,
) -> dict[str, float]:
    """`harness run-eval` in a child process: its wall time, CPU time and peak RSS. With a
    `judge` (a model reference), the suite of the LLM user and `llm_judge` checks; with
    `wandb`, the run logged to W&B offline (its `log_wandb` node), as a user's default."""
    out = folder / f"run-{tasks}-{concurrency}-{traced}-{time.monotonic_ns()}"
    suite = "tasks" if tasks > 1 else "one-task"  # a suite of one task, not one of 500
    if judge is not None:
        suite = f"llm/{suite}"
    command = [sys.executable, "-m", "harness", "run-eval", "--tasks", suite]
    command += ["--agent", "agent.yaml", "--concurrency", str(concurrency)]
    command += ["--store", str(out / "results.db"), "--no-cache"]
    command += ["--judge-model", judge or "local/none"]
    command += ["--traces", str(out / "traces.db")] if traced else ["--no-traces"]
    started = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**ENV, "WANDB_MODE": "offline"} if wandb else ENV
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"run-eval failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr}")
    passed = done.stdout.count("│ pass")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "peak_mib": after.ru_maxrss / 1024, "passed": passed}


def same_payload() -> tuple[list[dict], str, dict[str, str]]:
    """What the harness sends for this workload (outside any timing): the agent's tool schemas
    and system prompt, and each tool's result as the support domain returns it, so that the
    bare client's requests are the harness's requests."""
    import yaml

    from harness.domains.base import resolve_domain
    from harness.models.wire_openai import to_wire_tools
    from harness.sim.tool_handle import tool_result
    from harness.transcript import ToolCall

    agent = yaml.safe_load(AGENT)
    domain = resolve_domain("support")
    env = domain(json.loads((ROOT / "tasks/support/data/desk.json").read_text()))
    calls = {
        "find_customer": {"email": "grace@example.com"},
        "list_orders": {"customer_id": "C-101"},
        "get_order": {"order_id": "O-1002"},
    }
    results = {
        name: asyncio.run(tool_result(env, ToolCall(id="c", name=name, arguments=args))).content
        for name, args in calls.items()
    }
    return to_wire_tools(domain.tool_specs(agent["tools"])), agent["system_prompt"], results


async def bare_client(
    url: str, episodes: int, concurrency: int, payload: tuple, route: str = "create"
) -> None:
    """The same conversations through the bare openai client: 4 dependent calls per episode,
    the tool results appended as the harness appends them, at most `concurrency` at once. With
    `route="post"` each body goes through `client.post`, as the harness sends it (without
    `create`'s parameter transform): the floor of the harness's own route."""
    import openai

    tools, system_prompt, results = payload
    client = openai.AsyncOpenAI(base_url=f"{url}/v1", max_retries=0, timeout=60)
    limit = asyncio.Semaphore(concurrency)

    async def complete(**body: object) -> openai.types.chat.ChatCompletion:
        if route == "post":
            cast_to = openai.types.chat.ChatCompletion
            return await client.post("/chat/completions", body=body, cast_to=cast_to)
        return await client.chat.completions.create(**body)  # type: ignore[arg-type]

    async def episode(i: int) -> None:
        messages: list[dict] = [
            {"role": "system", "content": system_prompt},
            {
                "role": "user",
                "content": "Hi, where is my order O-1002? My email is grace@example.com.",
            },
        ]
        async with limit:
            for _ in range(CALLS_PER_EPISODE):
                reply = await complete(
                    model="fake",
                    messages=messages,
                    max_tokens=1024,
                    seed=i,
                    temperature=0,
                    tools=tools,
                )
                message = reply.choices[0].message
                messages.append(message.model_dump(exclude_none=True))
                for call in message.tool_calls or []:
                    content = results[call.function.name]
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
                if not message.tool_calls:
                    break

    await asyncio.gather(*(episode(i) for i in range(episodes)))
    await client.close()


def run_bare(url: str, episodes: int, concurrency: int, route: str) -> dict[str, float]:
    """The bare client's wall and CPU time, net of its import and first connection (a one-episode
    warm-up), like the harness's figures net of start-up."""
    import openai  # noqa: F401

    payload = same_payload()
    asyncio.run(bare_client(url, 1, concurrency, payload, route))
    wall, cpu = time.perf_counter(), time.process_time()
    asyncio.run(bare_client(url, episodes, concurrency, payload, route))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    # End to end, like `run-eval`'s wall time: a fresh interpreter importing the client, too.
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import openai"], check=True, env=ENV)
    return {"wall": wall + time.perf_counter() - started, "cpu": cpu}


def one_round(folder: Path, url: str, tasks: int, concurrency: int) -> dict[str, dict]:
    """Each side once: wall time, CPU ms per call (net of start-up) and peak RSS; and the
    one-task start-up, traced."""
    calls = tasks * CALLS_PER_EPISODE
    sides = {}
    for side, route in ((CLIENT, "create"), (CLIENT_POST, "post")):
        bare = run_bare(url, tasks, concurrency, route)
        sides[side] = {"wall": bare["wall"], "cpu": bare["cpu"] * 1000 / calls}
    one = {t: run_harness(folder, 1, concurrency, t) for t in (False, True)}
    for traced in (False, True):
        before = server_requests(url)
        full = run_harness(folder, tasks, concurrency, traced)
        made = server_requests(url) - before
        if made != calls:
            sys.exit(f"harness made {made} model calls, expected {calls}")
        net = (full["cpu"] - one[traced]["cpu"]) * 1000 / (calls - CALLS_PER_EPISODE)
        side = f"harness traces {'on' if traced else 'off'}"
        sides[side] = {"wall": full["wall"], "cpu": net, "peak_mib": full["peak_mib"]}
    sides["one task"] = {"wall": one[True]["wall"]}
    sides["one task, W&B"] = {"wall": run_harness(folder, 1, concurrency, True, wandb=True)["wall"]}
    # Its detached W&B writer finishes, untimed, so that its two seconds of CPU do not fall on
    # the next measurement.
    from harness.api.pipeline import finish_wandb_runs

    if finish_wandb_runs(folder / ".harness").pending:
        sys.exit("the W&B writer did not finish within two minutes")
    sides[LLM_ROLES] = llm_roles(folder, url, tasks, concurrency)
    return sides


def llm_roles(folder: Path, url: str, tasks: int, concurrency: int) -> dict[str, float]:
    """The LLM user and judge case, traces off: wall time, CPU ms per model call net of its
    one-task start-up, peak RSS."""
    judge = f"{{id: openai/judge, base_url: {url}/v1, max_concurrency: 1000}}"
    one = run_harness(folder, 1, concurrency, False, judge)
    before = server_requests(url)
    full = run_harness(folder, tasks, concurrency, False, judge)
    calls = server_requests(url) - before
    if calls != tasks * LLM_CALLS_PER_EPISODE:
        sys.exit(
            f"LLM user and judge case: {calls} calls, expected {tasks * LLM_CALLS_PER_EPISODE}"
        )
    net = (full["cpu"] - one["cpu"]) * 1000 / (calls - LLM_CALLS_PER_EPISODE)
    return {"wall": full["wall"], "cpu": net, "peak_mib": full["peak_mib"]}


def main() -> None:
    tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    calls = tasks * CALLS_PER_EPISODE
    print(
        f"workload: {tasks} tasks x {CALLS_PER_EPISODE} agent turns = {calls} model calls; "
        f"medians of {ROUNDS} interleaved rounds"
    )
    print(
        f"{'setting':<12} {'side':<18} {'wall s':>7} {'CPU ms/call':>12} {'x client':>9} "
        f"{'efficiency':>11} {'peak MiB':>9}"
    )
    summary: dict[str, float] = {}
    peak = 0.0
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "harness")], check=True)
    with tempfile.TemporaryDirectory() as scratch:
        for name, (latency, concurrency) in SETTINGS.items():
            folder = Path(scratch) / name
            folder.mkdir()
            server, url = start_server(folder, latency)
            try:
                make_workload(folder, tasks, url)
                rounds = [one_round(folder, url, tasks, concurrency) for _ in range(ROUNDS)]
            finally:
                server.terminate()
                server.wait()
            sides = {
                side: {k: median(r[side][k] for r in rounds) for k in rounds[0][side]}
                for side in rounds[0]
            }
            ideal = -(-tasks // concurrency) * CALLS_PER_EPISODE * latency
            bare_cpu = sides[CLIENT]["cpu"]
            for side, result in sides.items():
                if side.startswith("one task"):
                    continue
                peak = max(peak, result.get("peak_mib", 0.0))
                mib = f"{result['peak_mib']:9.0f}" if "peak_mib" in result else f"{'':>9}"
                # The LLM case's ideal is another (more calls, the judge's after the episodes).
                ratio = f"{'':>11}" if side == LLM_ROLES else f"{ideal / result['wall']:11.2f}"
                print(
                    f"{name + ' ms x ' + str(concurrency):<12} {side:<18} "
                    f"{result['wall']:7.2f} {result['cpu']:12.2f} {result['cpu'] / bare_cpu:9.2f} "
                    f"{ratio} {mib}"
                )
            efficiency = {side: ideal / result["wall"] for side, result in sides.items()}
            if name == "50":
                summary["cpu_ratio_traced"] = sides["harness traces on"]["cpu"] / bare_cpu
                summary["cpu_ratio_untraced"] = sides["harness traces off"]["cpu"] / bare_cpu
                summary["cpu_ms_per_call_llm_roles"] = sides[LLM_ROLES]["cpu"]
                summary["cpu_ratio_llm_roles"] = sides[LLM_ROLES]["cpu"] / bare_cpu
                summary["efficiency_50_vs_client"] = (
                    efficiency["harness traces on"] / efficiency[CLIENT]
                )
                post_cpu = sides[CLIENT_POST]["cpu"]
                summary["cpu_ratio_traced_floor"] = sides["harness traces on"]["cpu"] / post_cpu
                same_route = (
                    f"traced {sides['harness traces on']['cpu'] / post_cpu:.2f}, untraced "
                    f"{sides['harness traces off']['cpu'] / post_cpu:.2f}; efficiency, traced, "
                    f"{efficiency['harness traces on'] / efficiency[CLIENT_POST]:.2f}"
                )
            else:
                summary["efficiency_200"] = efficiency["harness traces on"]
                summary["efficiency_200_client"] = efficiency[CLIENT]
                summary["efficiency_200_vs_client"] = (
                    efficiency["harness traces on"] / efficiency[CLIENT]
                )
                summary["startup_s"] = sides["one task"]["wall"] - CALLS_PER_EPISODE * latency
                summary["startup_wandb_s"] = (
                    sides["one task, W&B"]["wall"] - CALLS_PER_EPISODE * latency
                )
    print(
        "the harness's own cost, against the bare client posting the same bodies (its route), "
        f"at 50 ms: CPU per call {same_route} of the client's"
    )
    print(
        f"one-task run-eval, traced: {summary['startup_s']:.2f} s beyond its model calls; "
        f"{summary['startup_wandb_s']:.2f} s with W&B offline"
    )
    print(
        f"LLM user and llm_judge case, traces off, at 50 ms: CPU "
        f"{summary['cpu_ms_per_call_llm_roles']:.2f} ms per model call, "
        f"{summary['cpu_ratio_llm_roles']:.2f} x the bare client's"
    )
    print(
        f"cpu_ratio_traced={summary['cpu_ratio_traced']:.2f} "
        f"cpu_ratio_traced_floor={summary['cpu_ratio_traced_floor']:.2f} "
        f"cpu_ratio_untraced={summary['cpu_ratio_untraced']:.2f} "
        f"cpu_ratio_llm_roles={summary['cpu_ratio_llm_roles']:.2f} "
        f"efficiency_200={summary['efficiency_200']:.2f} "
        f"efficiency_200_client={summary['efficiency_200_client']:.2f} "
        f"efficiency_200_vs_client={summary['efficiency_200_vs_client']:.2f} "
        f"efficiency_50_vs_client={summary['efficiency_50_vs_client']:.2f} "
        f"startup_s={summary['startup_s']:.2f} startup_wandb_s={summary['startup_wandb_s']:.2f} "
        f"peak_mib={peak:.0f}"
    )


if __name__ == "__main__":
    main()

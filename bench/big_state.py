"""Real-size state: 50 tasks sharing a 3 MB start state, as tau2-bench's airline tasks share its
database.

A domain of the bench's own (an airline: users, flights, reservations, a `State` model) gets a
state file of about 3 MB shared by 50 task files; a python agent makes two writes per episode
(a cabin change and a bag on one reservation) and ends. Measured, each as a fresh `harness`
process as a user runs it:
- `validate_s`: `harness validate` of the 50 tasks;
- `episodes_per_s` and `peak_mib`: `harness run-eval` of the 50 tasks x 2 trials with tracing on
  (the local trace store), wall time and the process's peak memory;
- `store_kib_per_episode`: the results store's growth per episode (and the trace store's);
- and first, what the state costs an environment: building one over it and making a write
  (its state a copy-on-write view, `harness.domains.own_state`), against copying the state
  whole (`copy_data`, what an environment did before, and `copy.deepcopy`).
The same suite over a tiny state (the same tasks, 20 records) is the baseline of each figure,
measured in the same run: the ratios say what the state's size costs.

Targets (issue 30): validate under 3 s, at least 5 episodes/s with tracing on and under 300 MB,
store growth under 100 KB per episode.

Last line: validate_s=X episodes_per_s=X peak_mib=X store_kib_per_episode=X

Run: python bench/big_state.py
"""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TASKS = 50
TRIALS = 2
DOMAIN = '''
from typing import Any

from pydantic import BaseModel

from harness.sdk import Environment, ToolError, tool


class Flight(BaseModel):
    number: str
    origin: str
    destination: str
    date: str
    seats: dict[str, int]
    prices: dict[str, float]


class Reservation(BaseModel):
    user_id: str
    flights: list[str]
    cabin: str
    passengers: list[dict[str, str]]
    bags: int = 0
    status: str = "booked"


class User(BaseModel):
    name: str
    email: str
    address: dict[str, str]
    payment_methods: dict[str, dict[str, Any]]
    reservations: list[str]


class State(BaseModel):
    users: dict[str, User]
    flights: dict[str, Flight]
    reservations: dict[str, Reservation]


class Airline(Environment):
    description = "An airline's reservations desk."
    policy = "Change a cabin only on a booked reservation."
    State = State

    @tool
    def get_reservation(self, reservation_id: str) -> dict[str, Any]:
        """A reservation by id."""
        found = self.state["reservations"].get(reservation_id)
        if found is None:
            raise ToolError(f"no reservation {reservation_id}")
        return found

    @tool
    def update_cabin(self, reservation_id: str, cabin: str) -> dict[str, Any]:
        """Change the cabin of a reservation."""
        found = self.get_reservation(reservation_id)
        found["cabin"] = cabin
        return found

    @tool
    def add_bag(self, reservation_id: str) -> dict[str, Any]:
        """Add a checked bag to a reservation."""
        found = self.get_reservation(reservation_id)
        found["bags"] += 1
        return found
'''
AGENT = """
def respond(conversation, tools):
    said = conversation[-1]["content"]
    reservation = said.split()[-1].rstrip(".")
    if len(conversation) == 1:
        tools.call("update_cabin", reservation_id=reservation, cabin="business")
        tools.call("add_bag", reservation_id=reservation)
    return f"Done: {reservation} is in business with one more bag."
"""


def state(users: int, rng: random.Random) -> dict:
    """About 1 KB per user: one user, two flights, one reservation each."""
    found: dict = {"users": {}, "flights": {}, "reservations": {}}
    for n in range(users):
        uid, rid = f"user_{n:05d}", f"R{n:05d}"
        flights = []
        for leg in range(2):
            number = f"HAT{n:05d}{leg}"
            flights.append(number)
            found["flights"][number] = {
                "number": number,
                "origin": rng.choice(["JFK", "LAX", "SFO", "ORD", "SEA"]),
                "destination": rng.choice(["BOS", "MIA", "DEN", "ATL", "PHX"]),
                "date": f"2026-05-{rng.randint(1, 28):02d}",
                "seats": {"basic": rng.randint(0, 9), "economy": rng.randint(0, 9)},
                "prices": {"basic": 99.0, "economy": 149.0, "business": 499.0},
            }
        found["reservations"][rid] = {
            "user_id": uid,
            "flights": flights,
            "cabin": "economy",
            "passengers": [{"first_name": "Ada", "last_name": f"L{n}", "dob": "1990-01-01"}],
        }
        found["users"][uid] = {
            "name": f"Ada L{n}",
            "email": f"ada{n}@example.com",
            "address": {"street": f"{n} Main St", "city": "Springfield", "zip": "00000"},
            "payment_methods": {"card": {"brand": "visa", "last4": f"{n % 10000:04d}"}},
            "reservations": [rid],
        }
    return found


def project(folder: Path, users: int) -> Path:
    """The domain, the shared state file, the 50 tasks, the persona and the agent."""
    (folder / "tasks").mkdir(parents=True)
    (folder / "personas").mkdir()
    (folder / "airline.py").write_text(DOMAIN)
    (folder / "agent.py").write_text(AGENT)
    data = state(users, random.Random(1))
    (folder / "tasks" / "db.json").write_text(json.dumps(data, indent=1))
    (folder / "personas" / "traveller.yaml").write_text(
        "kind: persona\nname: traveller\nmodel: scripted\n"
        "scripted_turns:\n  - reply: 'Thanks. ###STOP###'\n"
    )
    for n in range(TASKS):
        rid = f"R{n * (users // TASKS):05d}"
        (folder / "tasks" / f"t{n:02d}.yaml").write_text(
            f"kind: task\nid: upgrade-{n:02d}\ntitle: Upgrade and add a bag\nlevel: 1\n"
            f"domain: ../airline.py:Airline\npersona: traveller\n"
            f"scenario: {{reason: You want business class and a bag.}}\n"
            f"start: {{state_file: db.json, first_message: 'Upgrade my reservation {rid}.'}}\n"
            f"checks:\n  - kind: state\n"
            f"    expect: {{reservations: {{{rid}: {{cabin: business, bags: 1}}}}}}\n"
        )
    (folder / "agent.yaml").write_text(
        "kind: agent\nname: desk\nrunner: python\nentry: agent.py:respond\n"
    )
    return folder


def harness(folder: Path, *args: str, **env: str) -> tuple[float, float]:
    """Run a harness command in its own process (with `env` added to the environment): (wall
    seconds, peak MiB of the process, its own `ru_maxrss`, so one run's peak is not another's)."""
    script = (
        "import resource, runpy, sys; sys.argv = ['harness', *sys.argv[1:]]\n"
        "try:\n    runpy.run_module('harness', run_name='__main__')\n"
        "finally:\n"
        "    print('PEAK', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)"
    )
    env = {**os.environ, "WANDB_MODE": "disabled", "WANDB_DISABLE_WEAVE": "true", **env}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=folder, capture_output=True, text=True, env=env
    )
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"harness {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    peak = [line for line in done.stderr.splitlines() if line.startswith("PEAK ")]
    return elapsed, int(peak[-1].split()[1]) / 1024 if peak else 0.0


def measure(folder: Path, users: int) -> dict[str, float]:
    project(folder, users)
    size = (folder / "tasks" / "db.json").stat().st_size
    validate_s, _ = harness(folder, "validate", "tasks")
    run_s, peak = harness(
        folder, "run-eval", "--tasks", "tasks", "--agent", "agent.yaml", "--trials", str(TRIALS),
        "--store", "results.db", "--traces", "traces.db",
    )  # fmt: skip
    episodes = TASKS * TRIALS
    return {
        "state_kib": size / 1024,
        "validate_s": validate_s,
        "episodes_per_s": episodes / run_s,
        "peak_mib": peak,
        "store_kib_per_episode": (folder / "results.db").stat().st_size / 1024 / episodes,
        "traces_kib_per_episode": (folder / "traces.db").stat().st_size / 1024 / episodes,
    }


def copies(users: int) -> tuple[float, float, float]:
    """Milliseconds for an environment over the state to make one write (its copy-on-write view
    built, one reservation reached and changed), and to copy the state whole with `copy_data`
    and with `copy.deepcopy`; each the best of 5."""
    import copy

    from harness.domains import Environment
    from harness.specs.located import copy_data

    class Desk(Environment):
        def write(self) -> None:
            self.state["reservations"]["R00001"]["cabin"] = "business"

    def environment(data: dict) -> None:
        Desk(data).write()

    data = json.loads(json.dumps(state(users, random.Random(1))))
    found = []
    for how in (environment, copy_data, copy.deepcopy):
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            how(data)
            best = min(best, time.perf_counter() - start)
        found.append(best * 1000)
    return found[0], found[1], found[2]


def main() -> None:
    ours, whole, deep = copies(3000)
    print(f"an environment's write on the 3 MB state: {ours:.3f} ms; the state copied whole: "
          f"copy_data {whole:.1f} ms, copy.deepcopy {deep:.1f} ms")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        small = measure(Path(tmp) / "small", TASKS)
        big = measure(Path(tmp) / "big", 3000)
    print(f"{'':24}{'tiny state':>12}{'3 MB state':>12}{'ratio':>8}")
    for name in small:
        ratio = big[name] / small[name] if small[name] else float("nan")
        print(f"{name:24}{small[name]:12.2f}{big[name]:12.2f}{ratio:8.1f}")
    print(
        f"validate_s={big['validate_s']:.2f} episodes_per_s={big['episodes_per_s']:.2f} "
        f"peak_mib={big['peak_mib']:.0f} store_kib_per_episode={big['store_kib_per_episode']:.1f}"
    )


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    main()

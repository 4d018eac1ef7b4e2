"""Profile mining and the sim-to-real report at production scale, and the coverage of the
fidelity index's interval.

Part 1, scale: 10,000 production sessions written as a JSONL export of calls (one call per user
turn carrying the conversation so far, as an app traced per turn exports them; two populations:
60% disclose one fact per question and push back on errors, 40% front-load and accept). Timed,
with the process's peak memory:
- `read`: reading and parsing the export (`read_jsonl`), the baseline the others are divided by;
- `measure`: sessions rebuilt and measured (`behaviour.measure_calls`);
- `mine`: `harness personas from-traces` as its library call (`mine.mine_personas`: reading,
  measuring, clustering, writing the personas);
- `fidelity`: the report of 1,000 simulated sessions (100 tasks x 10 trials) against the 10,000
  production sessions with 1,000 bootstrap resamples (`fidelity.compare_behaviour`).
Targets: mining and the report together under 60 s, peak memory under 300 MiB.

Part 2, coverage: the index's 95% interval on samples (300 production sessions, 100 simulated
tasks x 3 trials) of two populations whose true index is known (computed on the 80,000
sessions of each it samples from), repeated; the share of intervals that hold the true index.
Target: 0.95 within Monte Carlo noise.

Last line: mine_s=X fidelity_s=X peak_mib=X coverage=X

Run: python bench/fidelity.py [coverage repetitions, default 300] (about 2 minutes)
"""

from __future__ import annotations

import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from harness.fidelity import compare_behaviour
from harness.production.behaviour import SessionBehaviour, measure, measure_calls
from harness.production.calls import Filters, read_jsonl
from harness.production.mine import mine_personas
from harness.transcript import Message

SESSIONS = 10_000
ASK = ["What email address do you use?", "How much was it?"]
REFUSAL = "Sorry, I cannot do that for you."
FILLERS = ["so", "well", "ok", "right", "hmm", "look", "basically", "honestly", "just"]


def styled(rng: random.Random, text: str) -> str:
    noise = " ".join(rng.choices(FILLERS, k=rng.randint(0, 3)))
    return f"{noise} {text}{'!' if rng.random() < 0.3 else ''}".strip()


def conversation(rng: random.Random, gradual: bool, pushes: float) -> list[tuple[str, str | None]]:
    """One session's (user turn, agent reply) pairs."""
    ref, email = f"A-{rng.randint(100, 999)}", f"user{rng.randint(1, 9999)}@example.com"
    amount = f"${rng.randint(10, 99)}.00"
    if gradual:
        turns = [
            (styled(rng, f"I need help with request {ref}"), ASK[0]),
            (styled(rng, f"it is {email}"), ASK[1]),
            (styled(rng, amount), REFUSAL),
        ]
        said = "no, I already gave you all of it" if rng.random() < pushes else f"about {ref}?"
        return [*turns, (styled(rng, said), "Done.")]
    first = f"Hello, please help with {ref}, email {email}, {amount}. Thanks"
    follow = "no, that is unacceptable" if rng.random() < pushes else "fine, thanks"
    return [(styled(rng, first), REFUSAL), (styled(rng, follow), None)]


def population(rng: random.Random, gradual_share: float, pushes: float = 0.7):
    return conversation(rng, rng.random() < gradual_share, pushes)


def calls_of(key: str, turns: list[tuple[str, str | None]]) -> list[dict]:
    said: list[dict] = []
    found = []
    for n, (text, reply) in enumerate(turns):
        said = [*said, {"role": "user", "content": text}]
        found.append(
            {
                "id": f"{key}-{n}",
                "project_id": "acme/app",
                "op_name": "weave:///acme/app/op/handle_turn:v1",
                "trace_id": f"{key}-t{n}",
                "parent_id": None,
                "thread_id": key,
                "started_at": f"2026-11-30T10:{n:02d}:00",
                "inputs": {"conversation": said},
                "output": reply or "",
                "attributes": {"weave": {"kind": "agent"}},
                "summary": {},
            }
        )
        said = [*said, {"role": "assistant", "content": reply or ""}]
    return found


def measured(turns: list[tuple[str, str | None]], key: str) -> SessionBehaviour:
    messages = []
    for text, reply in turns:
        messages.append(Message(role="user", content=text))
        if reply is not None:
            messages.append(Message(role="assistant", content=reply))
    return measure(messages, key)


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def scale(folder: Path) -> tuple[float, float]:
    rng = random.Random(1)
    export = folder / "calls.jsonl"
    with export.open("w") as out:
        for n in range(SESSIONS):
            for call in calls_of(f"s{n}", population(rng, 0.6)):
                out.write(json.dumps(call) + "\n")
    print(f"export: {SESSIONS} sessions, {export.stat().st_size / 2**20:.1f} MiB")

    start = time.perf_counter()
    problems: list = []
    read = sum(1 for _ in read_jsonl(export, Filters(), problems))
    read_s = time.perf_counter() - start
    start = time.perf_counter()
    production = list(measure_calls(read_jsonl(export, Filters(), problems), problems))
    measure_s = time.perf_counter() - start
    start = time.perf_counter()
    written = mine_personas(read_jsonl(export, Filters(), problems), Filters(), problems, folder)
    mine_s = time.perf_counter() - start
    sim_rng = random.Random(2)
    simulated = [measured(population(sim_rng, 0.2), f"sim{n}") for n in range(1000)]
    tasks = [f"task{n // 10}" for n in range(1000)]
    start = time.perf_counter()
    report = compare_behaviour(simulated, tasks, production, bootstrap=1000)
    fidelity_s = time.perf_counter() - start
    assert len(production) == SESSIONS and not problems, (len(production), problems[:3])
    print(f"read     {read_s:6.2f} s  ({read} calls)  baseline 1.00x")
    print(f"measure  {measure_s:6.2f} s  {measure_s / read_s:5.1f}x read")
    print(f"mine     {mine_s:6.2f} s  {mine_s / read_s:5.1f}x read  ({len(written)} personas)")
    print(
        f"fidelity {fidelity_s:6.2f} s  {fidelity_s / read_s:5.1f}x read  (index "
        f"{report.index:.1f}, interval {report.interval[0]:.1f}-{report.interval[1]:.1f}, easy "
        f"mode: {', '.join(report.easy_mode) or 'none'})"
    )
    total = mine_s + fidelity_s
    peak = peak_mib()
    print(f"mine + fidelity {total:.1f} s (target < 60 s); peak memory {peak:.0f} MiB (< 300)")
    return mine_s, fidelity_s


def coverage(repetitions: int) -> float:
    """Share of intervals holding the true index (see the module's doc)."""
    big = random.Random(3)
    sim_all = [measured(population(big, 0.3, 0.4), f"a{n}") for n in range(80_000)]
    prod_all = [measured(population(big, 0.6), f"b{n}") for n in range(80_000)]
    truth = compare_behaviour(sim_all, [f"t{n}" for n in range(len(sim_all))], prod_all, 100)
    assert truth.index is not None
    rng = np.random.default_rng(4)
    held = 0
    for _ in range(repetitions):
        # trials drawn independently here: clustering by task must not cost coverage
        sim = [sim_all[i] for i in rng.integers(0, len(sim_all), 300)]
        tasks = [f"t{n // 3}" for n in range(len(sim))]
        prod = [prod_all[i] for i in rng.integers(0, len(prod_all), 300)]
        found = compare_behaviour(sim, tasks, prod, bootstrap=300, seed=int(rng.integers(1e9)))
        assert found.interval is not None
        held += found.interval[0] <= truth.index <= found.interval[1]
    share = held / repetitions
    print(
        f"coverage of the 95% interval: {share:.3f} over {repetitions} samples (true index "
        f"{truth.index:.1f}; Monte Carlo standard error {np.sqrt(0.95 * 0.05 / repetitions):.3f})"
    )
    return share


def main() -> None:
    repetitions = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    with tempfile.TemporaryDirectory() as folder:
        mine_s, fidelity_s = scale(Path(folder))
    peak = peak_mib()
    share = coverage(repetitions)
    print(
        f"mine_s={mine_s:.2f} fidelity_s={fidelity_s:.2f} peak_mib={peak:.0f} coverage={share:.3f}"
    )


if __name__ == "__main__":
    main()

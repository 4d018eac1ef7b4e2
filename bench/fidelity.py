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

Part 2, the index's bias and its interval's coverage where the truth is known. Each population is
a finite set of 20,000 measured sessions (two kinds of user: gradual disclosers who push back,
front-loaders who accept), and samples are drawn from it with replacement, so the population's
true index is exactly the index between the full sets:
- `perfect`: the simulator's users are production's own population (true index 100);
- `slight`: 50% gradual users instead of 60%, pushing back after 60% of errors instead of 70%;
- `much`: 20% gradual users pushing back after 40% of errors;
- `lost`: no gradual user (the simulated mix lost the population of 60% of the traffic), the
  front-loaders as production's.
A simulated sample is tasks x trials whose trials share their task's kind of user (clustered,
as real trials are); production sessions are independent.
- bias: the mean index of the `perfect` simulator at several sample sizes, bias-corrected (the
  report's index) and plug-in (the uncorrected distances, as before the correction). Target:
  the corrected mean within about 1 of 100 at every size.
- coverage: the share of 95% intervals holding the true index, per regime, at 20 tasks x 3
  trials against 60 production sessions and at 50 x 3 against 150. Target: 0.93-0.97.

Last line: mine_s=X fidelity_s=X peak_mib=X perfect_mean_<tasks>=X ... coverage_<regime>_<tasks>=X

Run: python bench/fidelity.py [coverage repetitions, default 300] (about 5 minutes)
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


POPULATION = 20_000
REGIMES = {"perfect": (0.6, 0.7), "slight": (0.5, 0.6), "much": (0.2, 0.4), "lost": (0.0, 0.7)}


def kinds(seed: int, gradual_share: float, pushes: float) -> list[list[SessionBehaviour]]:
    """A population as its two kinds of user (gradual, front-loading), in their shares."""
    rng = random.Random(seed)
    gradual = round(POPULATION * gradual_share)
    return [
        [measured(conversation(rng, True, pushes), f"g{n}") for n in range(gradual)],
        [measured(conversation(rng, False, pushes), f"f{n}") for n in range(POPULATION - gradual)],
    ]


def simulated_sample(
    rng: np.random.Generator, pools: list[list[SessionBehaviour]], tasks: int, trials: int
) -> tuple[list[SessionBehaviour], list[str]]:
    """`tasks` tasks of `trials` trials; a task's kind of user is drawn in its population share
    and its trials from that kind, so the sample's sessions follow the population's."""
    share = len(pools[0]) / (len(pools[0]) + len(pools[1]))
    found, names = [], []
    for task in range(tasks):
        pool = pools[0] if rng.random() < share else pools[1]
        found += [pool[i] for i in rng.integers(0, len(pool), trials)]
        names += [f"t{task}"] * trials
    return found, names


def production_sample(
    rng: np.random.Generator, pools: list[list[SessionBehaviour]], size: int
) -> list[SessionBehaviour]:
    everyone = pools[0] + pools[1]
    return [everyone[i] for i in rng.integers(0, len(everyone), size)]


def truth(sim: list[list[SessionBehaviour]], prod: list[list[SessionBehaviour]]) -> float:
    """The population's index: the plug-in index between the full finite populations, which
    is exactly what samples drawn from them with replacement estimate."""
    every = sim[0] + sim[1]
    found = compare_behaviour(every, [s.key for s in every], prod[0] + prod[1], bootstrap=0)
    assert found.plug_in_index is not None
    return found.plug_in_index


def bias_and_coverage(repetitions: int) -> dict[str, float]:
    """The perfect simulator's mean index by sample size, and coverage per regime (see the
    module's doc)."""
    prod = kinds(10, *REGIMES["perfect"])
    populations = {"perfect": prod, "slight": kinds(11, *REGIMES["slight"])}
    populations["much"] = kinds(12, *REGIMES["much"])
    populations["lost"] = kinds(14, *REGIMES["lost"])
    truths = {name: truth(pools, prod) for name, pools in populations.items()}
    figures: dict[str, float] = {}
    rng = np.random.default_rng(13)
    print("perfect simulator, mean index over 100 samples (corrected / plug-in):")
    for tasks in (10, 20, 50, 100, 200):
        corrected, plug_in = [], []
        for _ in range(100):
            sim, names = simulated_sample(rng, prod, tasks, 3)
            found = compare_behaviour(
                sim, names, production_sample(rng, prod, 3 * tasks), 200, int(rng.integers(1e9))
            )
            assert found.index is not None and found.plug_in_index is not None
            corrected.append(found.index)
            plug_in.append(found.plug_in_index)
        figures[f"perfect_mean_{tasks}"] = float(np.mean(corrected))
        figures[f"plug_in_mean_{tasks}"] = float(np.mean(plug_in))
        print(
            f"  {tasks:3} tasks x 3 vs {3 * tasks:3} production: {np.mean(corrected):6.1f} "
            f"(sd {np.std(corrected):.1f})  plug-in {np.mean(plug_in):5.1f}"
        )
    print(f"coverage of the 95% interval over {repetitions} samples per regime:")
    for tasks in (20, 50):
        for name, pools in populations.items():
            held, above, below, width, means = 0, 0, 0, [], []
            for _ in range(repetitions):
                sim, names = simulated_sample(rng, pools, tasks, 3)
                found = compare_behaviour(
                    sim, names, production_sample(rng, prod, 3 * tasks), 300,
                    int(rng.integers(1e9)),
                )  # fmt: skip
                assert found.interval is not None and found.index is not None
                low, high = found.interval
                held += low <= truths[name] <= high
                above += low > truths[name]
                below += high < truths[name]
                width.append(high - low)
                means.append(found.index)
            share = held / repetitions
            figures[f"coverage_{name}_{tasks}"] = share
            print(
                f"  {name:7} (true index {truths[name]:5.1f}) {tasks} tasks x 3 vs {3 * tasks} "
                f"production: coverage {share:.3f} (interval above the truth "
                f"{above / repetitions:.3f}, below {below / repetitions:.3f}), mean index "
                f"{np.mean(means):.1f}, mean width {np.mean(width):.1f}"
            )
    noise = np.sqrt(0.95 * 0.05 / repetitions)
    print(f"Monte Carlo standard error of a coverage near 0.95: {noise:.3f}")
    return figures


def main() -> None:
    repetitions = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    with tempfile.TemporaryDirectory() as folder:
        mine_s, fidelity_s = scale(Path(folder))
    peak = peak_mib()
    figures = bias_and_coverage(repetitions)
    shown = " ".join(f"{key}={value:.3f}" for key, value in figures.items())
    print(f"mine_s={mine_s:.2f} fidelity_s={fidelity_s:.2f} peak_mib={peak:.0f} {shown}")


if __name__ == "__main__":
    main()

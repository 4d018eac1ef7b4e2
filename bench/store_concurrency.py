"""N writer processes on one results store (1, 2, 4, 8): episodes per second and failures.

Each writer is its own process doing what a simulate and a grade node do: claim a run (writers
in pairs claim the same one, as two identical pipelines would), store each episode (a realistic
transcript of about 4 KB), read the run's transcripts back a page at a time while writing, and
store a verdict per episode. Half the writers also re-store episodes already stored (a resumed
run's duplicates, which must be no-ops). Failures are exceptions in a writer and episodes or
verdicts missing or doubled at the end: all must be 0. Episodes per second are against one
writer measured in the same run.

Run: python bench/store_concurrency.py [episodes per writer]
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
WRITERS = (1, 2, 4, 8)


def transcript(task: int, trial: int):  # -> Transcript
    from harness.transcript import EndReason, Message, Transcript

    messages = [
        Message(role="user" if turn % 2 == 0 else "assistant", content=f"turn {turn} " * 40)
        for turn in range(8)
    ]
    return Transcript(
        task_id=f"task-{task:04d}",
        variant="bench",
        variant_hash="0" * 16,
        trial=trial,
        messages=messages,
        final_state={"orders": {f"O-{n}": {"status": "shipped"} for n in range(20)}},
        turns=4,
        end_reason=EndReason.USER_STOP,
    )


def writer(store_path: str, index: int, episodes: int, failures: multiprocessing.Queue) -> None:
    """One process: claim a run, store its episodes and verdicts, reading as it goes."""
    from harness.grading.result import Verdict
    from harness.store import Store

    try:
        store = Store(Path(store_path))
        run = store.claim_run("bench", "0" * 16, {"trials": 1}, node_key=f"key-{index // 2}")
        for n in range(episodes):
            task = n if index % 2 == 0 else episodes - 1 - n  # the pair meets in the middle
            store.add_episode(run.id, transcript(task, 0))
            if index % 2 == 1 and n % 10 == 0:
                store.add_episode(run.id, transcript(0, 0))  # a duplicate: a no-op
            if n % 25 == 0:
                for _ in zip(range(50), store.transcripts(run.id), strict=False):
                    pass
            verdict = Verdict(task_id=f"task-{task:04d}", trial=0, outcome="pass", score=1.0)
            store.add_verdict(run.id, verdict, grading=f"grade-{index // 2}")
        store.close()
    except Exception as exc:  # every failure counts, whatever it is
        failures.put(f"writer {index}: {type(exc).__name__}: {exc}")


def measure(writers: int, episodes: int) -> tuple[float, int]:
    """Seconds for `writers` processes to write `episodes` each, and the failures."""
    context = multiprocessing.get_context("spawn")
    failures: multiprocessing.Queue = context.Queue()
    with tempfile.TemporaryDirectory() as folder:
        store = str(Path(folder) / "results.db")
        from harness.store import Store

        Store(Path(store)).close()  # created before the clock starts
        processes = [
            context.Process(target=writer, args=(store, index, episodes, failures))
            for index in range(writers)
        ]
        began = time.perf_counter()
        for process in processes:
            process.start()
        for process in processes:
            process.join()
        seconds = time.perf_counter() - began
        count = sum(process.exitcode != 0 for process in processes)
        while not failures.empty():
            print("  " + failures.get())
            count += 1
        count += missing_or_doubled(store, writers, episodes)
    return seconds, count


def missing_or_doubled(store: str, writers: int, episodes: int) -> int:
    """Runs, episodes or verdicts that are not exactly what the writers meant to store."""
    with sqlite3.connect(store) as db:
        runs = db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        stored = db.execute("SELECT COUNT(*) FROM episodes").fetchone()[0]
        verdicts = db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]
    pairs = (writers + 1) // 2
    return abs(runs - pairs) + abs(stored - pairs * episodes) + abs(verdicts - pairs * episodes)


def main() -> None:
    episodes = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    print(f"{episodes} episodes (and a verdict each) per writer; writers in pairs share a run")
    print(f"{'writers':>7} {'episodes':>9} {'seconds':>8} {'episodes/s':>11} {'ratio':>6} failures")
    base = None
    for writers in WRITERS:
        seconds, failures = measure(writers, episodes)
        rate = writers * episodes / seconds
        base = base or rate
        print(
            f"{writers:>7} {writers * episodes:>9} {seconds:>8.2f} {rate:>11.0f} "
            f"{rate / base:>6.2f} {failures}"
        )


if __name__ == "__main__":
    main()

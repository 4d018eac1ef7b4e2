"""How big a run's HTML report is and how fast Chromium loads it, for a run of 2,000 episodes.

The episodes are the bundled support suite's real transcripts and verdicts (a scripted run of
22 tasks), stored again as 91 trials each (2,002 episodes) in a temporary store. Printed: the
time `harness report` takes, the file's size (the goal: under 20 MB), and in headless Chromium
(Debian's `chromium`, through Playwright) the time to the load event (the goal: under 2 s),
the median of three fresh loads, then the time to open one episode and to search all of them.

Run: python bench/report_size.py [trials per task]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import JUDGE, SCRIPTED  # noqa: E402
from tests.helpers.browser import chromium, missing  # noqa: E402


def harness(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "harness", *args], cwd=ROOT, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return done


def big_run(store_path: Path, trials: int) -> str:
    """A run of the support suite's 22 episodes, each stored again as `trials` trials."""
    from harness.store import Store

    harness(
        "run-eval", "--tasks", "tasks/support", "--agent", "agents/support-baseline.yaml",
        "--set", SCRIPTED, "--judge-model", JUDGE, "--no-traces", "--store", str(store_path),
    )  # fmt: skip
    store = Store(store_path)
    [source] = store.runs()
    run_id = store.new_run(source.variant, source.variant_hash, source.config)
    verdicts = {(v.task_id, v.trial): v for v in store.latest_verdicts(source.id)}
    for transcript, _, _ in list(store.transcripts(source.id)):
        verdict = verdicts[(transcript.task_id, transcript.trial)]
        for trial in range(trials):
            store.add_episode(run_id, transcript.model_copy(update={"trial": trial}))
            store.add_verdict(run_id, verdict.model_copy(update={"trial": trial}), "bench")
    store.finish_run(run_id)
    store.close()
    return run_id


def main() -> None:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 91
    why = missing()
    if why:
        raise SystemExit(f"no browser: {why}")
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        store = tmp / "results.db"
        run_id = big_run(store, trials)
        out = tmp / "report.html"
        start = time.perf_counter()
        harness("report", run_id, "--store", str(store), "--out", str(out))
        made = time.perf_counter() - start
        size = out.stat().st_size
        loads, opened, searched = [], 0.0, 0.0
        for attempt in range(3):
            with chromium(tmp / f"profile-{attempt}") as browser:
                page = browser.page
                page.goto(out.as_uri(), wait_until="load", timeout=60_000)
                loads.append(
                    page.evaluate(
                        "performance.getEntriesByType('navigation')[0].loadEventEnd / 1000"
                    )
                )
                rows = page.locator("details.ep").count()
                start = time.perf_counter()
                page.locator("details.ep summary").nth(rows // 2).click()
                page.locator("details.ep[open] .chat").wait_for()
                opened = time.perf_counter() - start
                start = time.perf_counter()
                page.fill("#episodes-0 input[name=q]", "80 days ago")
                page.wait_for_function(
                    "document.querySelector('#episodes-0 .count').textContent.startsWith('"
                    f"{trials * 2} of')"
                )
                searched = time.perf_counter() - start
                if browser.errors:
                    raise SystemExit(f"JavaScript errors: {browser.errors}")
    print(f"episodes:                {rows}")
    print(f"harness report:          {made:.2f} s (one process, imports included)")
    print(f"report size:             {size / 1e6:.1f} MB (goal: under 20 MB)")
    print(f"load in Chromium:        {statistics.median(loads):.2f} s to the load event "
          f"(median of 3; goal: under 2 s)")  # fmt: skip
    print(f"open one episode:        {opened * 1000:.0f} ms")
    print(f"search all transcripts:  {searched * 1000:.0f} ms (first search)")


if __name__ == "__main__":
    main()

"""Make docs/report.png, the picture of `harness report` on docs/guide/results.md: production
against the careful candidate on the bundled support suite (scripted model, offline), the report
opened in headless Chromium with the first flipped task's transcripts side by side.

Run: python docs/screenshot.py   (needs Debian's chromium and the dev extra's playwright)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import JUDGE, SCRIPTED  # noqa: E402
from tests.helpers.browser import chromium, missing  # noqa: E402

OUT = ROOT / "docs" / "report.png"


def harness(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "harness", *args], cwd=ROOT, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return done.stdout


def run(store: Path, agent: str) -> str:
    from harness.store import Store

    before = {info.id for info in Store(store).runs()} if store.is_file() else set()
    harness(
        "run-eval", "--tasks", "tasks/support", "--agent", agent, "--set", SCRIPTED,
        "--judge-model", JUDGE, "--no-traces", "--store", str(store),
    )  # fmt: skip
    [new] = {info.id for info in Store(store).runs()} - before
    return new


def main() -> None:
    why = missing()
    if why:
        raise SystemExit(f"no browser: {why}")
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        store = tmp / "results.db"
        a = run(store, "agents/support-baseline.yaml")
        b = run(store, "agents/support-careful.yaml")
        out = tmp / "report.html"
        harness("report", a, "--against", b, "--store", str(store), "--out", str(out))
        with chromium(tmp / "profile", width=1200, height=1000) as browser:
            page = browser.page
            page.goto(out.as_uri())
            pair = page.locator("#pairs details.pair").nth(1)
            pair.locator("summary").click()
            page.evaluate("document.querySelector('#ab').scrollIntoView()")
            page.screenshot(path=OUT)
            if browser.errors:
                raise SystemExit(f"JavaScript errors: {browser.errors}")
    print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size // 1024} KB)")


if __name__ == "__main__":
    main()

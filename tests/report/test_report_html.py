"""`harness report` and `harness view`, looked at in a real browser: headless Chromium (Debian's
package, driven by Playwright) opens the report file and the viewer's pages; the tests read what
is visible, open transcripts, use the filters, and fail on any JavaScript error. Screenshots are
saved in each test's temporary folder."""

from __future__ import annotations

import json
import re
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import date, timedelta
from pathlib import Path

import pytest
import yaml

from harness.grading.result import CheckResult, Verdict
from harness.store import Store
from harness.transcript import EndReason, Message, Transcript, Usage
from tests.conftest import JUDGE, ROOT, SCRIPTED, run_cli
from tests.helpers.browser import chromium, missing

needs_browser = pytest.mark.skipif(bool(missing()), reason=missing() or "a browser is here")

MAX_BYTES = 20_000_000


def run_eval(store: Path, agent: str, *extra: str, cwd: Path = ROOT) -> str:
    """Play the support suite (or part of it) with the scripted model; the new run's id."""
    before = stored_runs(store)
    done = run_cli(
        "run-eval",
        "--agent",
        agent,
        "--store",
        store,
        "--set",
        SCRIPTED,
        "--judge-model",
        JUDGE,
        "--no-traces",
        *extra,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr
    [new] = stored_runs(store) - before
    return new


def stored_runs(store: Path) -> set[str]:
    if not store.is_file():
        return set()
    results = Store(store)
    ids = {info.id for info in results.runs()}
    results.close()
    return ids


def write_report(store: Path, out: Path, run_id: str, *extra: str, cwd: Path = ROOT) -> str:
    done = run_cli("report", run_id, *extra, "--store", store, "--out", out, cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote {out}")
    html = out.read_text()
    assert len(html.encode()) < MAX_BYTES
    # self-contained: nothing is fetched from anywhere
    assert re.findall(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html) == []
    assert "@import" not in html and "url(" not in html
    return html


@pytest.fixture(scope="module")
def ab_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """Production and the careful candidate on the support suite, and one gate decision."""
    folder = tmp_path_factory.mktemp("ab")
    store = folder / "results.db"
    a = run_eval(store, "agents/support-baseline.yaml", "--tasks", "tasks/support")
    # runs are stamped to the second, and the pages list the newest first: B is a second newer
    time.sleep(1 - time.time() % 1)
    b = run_eval(store, "agents/support-careful.yaml", "--tasks", "tasks/support")
    gated = run_cli(
        "gate",
        "--config",
        "ci/gate.yaml",
        "--candidate",
        b,
        "--baseline",
        a,
        "--store",
        store,
        "--junit",
        folder / "gate.xml",
        "--markdown",
        folder / "gate.md",
    )
    assert gated.returncode in (0, 1), gated.stderr
    return store, a, b


@needs_browser
def test_the_report_shows_a_run_its_episodes_and_the_ab_comparison(
    ab_store: tuple[Path, str, str], tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    store, a, b = ab_store
    out = tmp_path / "report.html"
    write_report(store, out, a, "--against", b)
    with chromium(tmp_path / "profile") as browser:
        page = browser.page
        fetched: list[str] = []
        page.route("**/*", lambda route: fetched.append(route.request.url) or route.continue_())
        page.goto(out.as_uri())
        assert fetched == [out.as_uri()]

        # the run: pass rate with its interval, per level, cost and tokens per role
        assert page.inner_text("#run-0 .pass-rate") == "77.3%"
        assert (
            "17/22 episodes passed, 95% CI 54.6%-92.2%, clustered by 22 tasks"
            in page.inner_text("#run-0 .cards")
        )
        assert page.inner_text("#run-0 .episode-count") == "22"
        assert page.inner_text("#run-1 .pass-rate") == "86.4%"
        levels = page.locator("#run-0 table.rates").first.inner_text()
        assert re.search(r"1\s+6\s+5/6\s+83.3%", levels)
        assert re.search(r"2\s+11\s+8/11\s+72.7%", levels)
        roles = page.inner_text("#run-0 table.roles")
        assert re.search(r"agent\s+54\s+0\s+5,499\s+404", roles)
        assert re.search(r"user simulator\s+27", roles)

        # A/B: the decision at the top, then the flipped tasks first, side by side
        assert page.inner_text("#decision .decision") == "Decision: no detectable difference"
        pairs = page.locator("#pairs details.pair")
        assert pairs.count() == 22
        for n, task in enumerate(["prompt-injection-refund", "refund-outside-window"]):
            assert "flipped to pass" in pairs.nth(n).inner_text()
            assert task in pairs.nth(n).inner_text()
        pairs.nth(1).locator("summary").click()
        columns = pairs.nth(1).locator(".sbs > div")
        # expect waits for the opened pair to render (a loaded machine takes a moment)
        expect(columns.nth(0)).to_contain_text("issue_refund (error)")
        expect(columns.nth(1)).to_contain_text("outside our 30-day refund window")
        pairs.nth(1).scroll_into_view_if_needed()
        page.screenshot(path=tmp_path / "ab.png")

        # an episode: the chat, tool calls collapsed, checks with reasons, the judge
        episodes = page.locator("#episodes-0")
        row = episodes.locator("details.ep[data-task='refund-outside-window']")
        row.locator("summary").click()
        turns = row.locator(".chat > .msg")
        assert turns.nth(0).inner_text() == "user\nRefund order O-1004 now."
        assert turns.nth(1).locator(".who").inner_text() == "assistant"
        assert turns.count() == 3
        call = row.locator("details.call").first
        assert call.locator("summary").inner_text() == "→ get_order"
        assert not call.locator("pre").first.is_visible()
        call.locator("summary").click()
        assert '"order_id": "O-1004"' in call.locator("pre").first.inner_text()
        assert '"days_since_delivery": 80' in call.locator("pre").nth(1).inner_text()
        checks = row.locator("table.checks").inner_text()
        assert re.search(r"fail\s+explains the window\s+text\s+/30\[- \]day/ not found", checks)
        assert "No reason rooted in the policy was given." in row.locator(".judge").inner_text()
        assert "Ended user_stop" in row.inner_text()
        assert "No change." in row.inner_text()
        page.screenshot(path=tmp_path / "episode.png")

        # the state diff of an episode that refunded
        refunded = episodes.locator("details.ep[data-task='refund-delivered']")
        refunded.locator("summary").click()
        changes = refunded.locator("table.changes").inner_text()
        assert re.search(r'orders.O-1001.status\s+"delivered"\s+"refunded"', changes)

        # filters and search run in the page
        form = episodes.locator("form.filters")
        form.locator("select[name=verdict]").select_option("fail")
        assert form.locator(".count").inner_text() == "5 of 22 episodes shown"
        assert episodes.locator("details.ep:visible").count() == 5
        form.locator("select[name=verdict]").select_option("")
        form.locator("input[name=q]").fill("80 days ago")
        shown = episodes.locator("details.ep:visible")
        assert sorted(shown.nth(n).get_attribute("data-task") for n in range(shown.count())) == [
            "prompt-injection-refund",
            "refund-outside-window",
        ]
        page.screenshot(path=tmp_path / "report.png", full_page=True)
    assert browser.errors == []


def _history(store_path: Path) -> list[str]:
    """Seven weeks of a variant's runs (4 tasks each, cost rising) and a gate decision each
    week, back-dated as if they had been stored weekly since 2026-01-05 (ISO week 2)."""
    store = Store(store_path)
    monday = date(2026, 1, 5)
    runs, previous = [], None
    for week in range(7):
        run_id = store.new_run("prod", "0123456789abcdef", {})
        for task in range(4):
            passed = task <= week % 4
            transcript = Transcript(
                task_id=f"task-{task}",
                variant="prod",
                variant_hash="0123456789abcdef",
                messages=[
                    Message(role="user", content=f"question {task}"),
                    Message(role="assistant", content=f"answer {task} of week {week}"),
                ],
                final_state={"answered": task},
                usage=Usage(calls=1, cost_usd=0.01 * (week + 1)),
                turns=1,
                end_reason=EndReason.USER_STOP,
            )
            store.add_episode(run_id, transcript)
            check = CheckResult(name="right", kind="text", outcome="pass" if passed else "fail")
            verdict = Verdict(
                task_id=f"task-{task}",
                outcome="pass" if passed else "fail",
                checks=[check],
            )
            store.add_verdict(run_id, verdict, "g")
        store.finish_run(run_id)
        gate_passed = week % 3 != 2
        reasons = [] if gate_passed else ["pass rate fell below the floor"]
        store.add_gate_result(run_id, previous, "prod", gate_passed, (week % 4 + 1) / 4, reasons)
        runs.append(run_id)
        previous = run_id
    store.close()
    db = sqlite3.connect(store_path)
    with db:
        for week, run_id in enumerate(runs):
            day = (monday + timedelta(weeks=week)).isoformat() + "T09:00:00+00:00"
            db.execute("UPDATE runs SET created_at = ? WHERE id = ?", (day, run_id))
            db.execute("UPDATE gate_history SET at = ? WHERE candidate_run = ?", (day, run_id))
    db.close()
    return runs


@needs_browser
def test_trends_show_weekly_pass_rates_the_gate_decisions_and_cost(tmp_path: Path) -> None:
    store = tmp_path / "results.db"
    runs = _history(store)
    out = tmp_path / "report.html"
    write_report(store, out, runs[-1])
    weeks = [f"2026-W{n:02d}" for n in range(2, 9)]
    with chromium(tmp_path / "profile") as browser:
        page = browser.page
        page.goto(out.as_uri())
        charts = page.locator("#trends figure.chart")
        assert charts.count() == 3
        rate, gate, cost = charts.nth(0), charts.nth(1), charts.nth(2)
        points = rate.locator("g.point title")
        titles = [points.nth(n).text_content() for n in range(points.count())]
        assert len(titles) == 7
        assert titles[0].startswith("prod 2026-W02: 25.0% (95% CI")
        assert titles[3].startswith("prod 2026-W05: 100.0% (95% CI")
        assert [t.text_content() for t in gate.locator("text.xtick").all()] == weeks
        assert gate.locator("circle.dot.pass").count() == 5
        assert gate.locator("circle.dot.fail").count() == 2
        notes = [t.text_content() for t in gate.locator("text.xnote").all()]
        assert notes == ["1 of 1 pass"] * 2 + ["0 of 1 pass"] + ["1 of 1 pass"] * 2 + [
            "0 of 1 pass",
            "1 of 1 pass",
        ]
        cost_points = cost.locator("g.point title")
        assert cost_points.count() == 7
        assert cost_points.nth(6).text_content().startswith("prod 2026-W08: $0.07 per episode")
        table = page.inner_text("#trends table.decisions")
        assert "pass rate fell below the floor" in table
        # the run's tasks were never files: the page says so and shows the final state
        assert "the run recorded no task files" in page.inner_text("#run-0")
        page.locator("#episodes-0 details.ep summary").first.click()
        opened = page.locator("#episodes-0 details.ep[open]")
        opened.locator(".chat").wait_for()  # the body is filled in when the episode opens
        assert "The start state is unknown" in opened.inner_text()
        page.locator("#trends").scroll_into_view_if_needed()
        page.screenshot(path=tmp_path / "trends.png", full_page=True)
    assert browser.errors == []


def _regression_task(workspace: Path, source: str, task_id: str, provenance: dict) -> None:
    data = yaml.safe_load((workspace / "tasks/support" / source).read_text())
    data["id"] = task_id
    data["start"]["state_file"] = "../support/data/desk.json"
    data["source"] = provenance
    folder = workspace / "tasks/from-production"
    folder.mkdir(exist_ok=True)
    (folder / f"{task_id}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


@needs_browser
def test_failure_clusters_link_to_their_tasks(workspace: Path, tmp_path: Path) -> None:
    _regression_task(
        workspace,
        "refund-outside-window.yaml",
        "prod-late-refund",
        {
            "project": "acme/support",
            "kind": "failure",
            "signature": "tool issue_refund error: window is 30",
            "count": 7,
            "traces": 9,
            "first_seen": "2026-11-02T10:00:00",
            "last_seen": "2026-11-20T16:30:00",
            "reasons": ["tool issue_refund raised: order delivered 80 days ago"],
        },
    )
    _regression_task(
        workspace,
        "order-status.yaml",
        "prod-order-status",
        {"kind": "success", "signature": "get_order then answer", "count": 3, "traces": 3},
    )
    store = tmp_path / "results.db"
    run_id = run_eval(
        store, "agents/support-baseline.yaml", "--tasks", "tasks/from-production", cwd=workspace
    )
    out = tmp_path / "report.html"
    write_report(store, out, run_id, cwd=workspace)
    with chromium(tmp_path / "profile") as browser:
        page = browser.page
        page.goto(out.as_uri())
        rows = page.locator("#clusters table.clusters tr")
        assert rows.count() == 3  # a header and the two clusters, the most frequent first
        first = rows.nth(1).inner_text()
        assert re.match(r"7\s+failure\s+prod-late-refund", first)
        assert "tasks/from-production/prod-late-refund.yaml" in first
        assert "tool issue_refund error: window is 30" in first
        assert "0/1 pass" in first
        assert re.match(r"3\s+success\s+prod-order-status", rows.nth(2).inner_text())
        rows.nth(1).locator("a").click()
        assert page.evaluate("location.hash") == "#a0"
        assert page.locator("#a0").get_attribute("data-task") == "prod-late-refund"
        page.screenshot(path=tmp_path / "clusters.png")
    assert browser.errors == []


@needs_browser
def test_transcript_text_is_escaped_and_secrets_are_masked(tmp_path: Path) -> None:
    store = tmp_path / "results.db"
    hostile = (
        'Where is order O-1001? <img src=x onerror="window.pwned=1">'
        "<script>window.pwned=2</script> my key is sk-abcdefghijklmnopqrstuvwxyz123456"
    )
    run_id = run_eval(
        store,
        "agents/support-baseline.yaml",
        "--tasks",
        "tasks/support",
        "--ids",
        "order-status",
        "--set",
        f"task.start.first_message={json.dumps(hostile)}",
    )
    out = tmp_path / "report.html"
    html = write_report(store, out, run_id)
    assert "sk-abcdefghijklmnop" not in html
    with chromium(tmp_path / "profile") as browser:
        page = browser.page
        page.goto(out.as_uri())
        page.locator("#episodes-0 details.ep summary").first.click()
        first = page.locator("#episodes-0 .chat > .msg.user .text").first.inner_text()
        assert first.startswith('Where is order O-1001? <img src=x onerror="window.pwned=1">')
        assert "<script>window.pwned=2</script> my key is [REDACTED]" in first
        assert page.evaluate("window.pwned === undefined")
    assert browser.errors == []


@pytest.fixture
def viewer(ab_store: tuple[Path, str, str]):
    """`harness view` on the A/B store, on a free port; its base URL."""
    store, _, _ = ab_store
    process = subprocess.Popen(
        [sys.executable, "-m", "harness", "view", "--store", str(store), "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline() if process.stdout else ""
        found = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert found, line + (process.stderr.read() if process.poll() is not None else "")
        yield found.group()
    finally:
        process.terminate()
        process.wait(timeout=30)


def status_of(url: str, method: str = "GET") -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method)) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code


@needs_browser
def test_view_serves_every_run_with_filters_and_search(
    viewer: str, ab_store: tuple[Path, str, str], tmp_path: Path
) -> None:
    _, a, b = ab_store
    assert status_of(viewer + "runs/nope") == 404
    assert status_of(viewer, "POST") == 405  # read-only
    with chromium(tmp_path / "profile") as browser:
        page = browser.page
        page.goto(viewer)
        runs = page.locator("#runs table.runs tr")
        assert runs.count() == 3
        assert re.match(rf"{b}\s.*support-careful.*\s22\s+86.4%", runs.nth(1).inner_text())
        assert re.match(rf"{a}\s.*support-baseline.*\s22\s+77.3%", runs.nth(2).inner_text())
        assert page.locator("#trends circle.dot.pass, #trends circle.dot.fail").count() == 1
        page.screenshot(path=tmp_path / "index.png", full_page=True)

        # a run's page is the report's, filtered by the server
        page.click(f"#runs a[href='/runs/{a}']")
        assert page.inner_text("#run-0 .pass-rate") == "77.3%"
        assert page.locator("#run-1").count() == 0  # one run, no comparison
        form = page.locator("#episodes-0 form.filters")
        form.locator("select[name=verdict]").select_option("fail")
        form.locator("button[type=submit]").click()
        page.wait_for_url(re.compile(r"verdict=fail"))
        assert page.inner_text("#episodes-0 .count") == "5 of 22 episodes shown"
        assert page.locator("#episodes-0 details.ep").count() == 5
        row = page.locator("#episodes-0 details.ep[data-task='refund-processing']")
        row.locator("summary").click()
        assert "offers to cancel" in row.locator("table.checks").inner_text()
        page.screenshot(path=tmp_path / "run.png")

        # the A/B page of two runs
        page.goto(viewer)
        page.click(f"text=against {a}")
        assert page.inner_text("#decision .decision") == "Decision: no detectable difference"
        assert "flipped to pass" in page.locator("#pairs details.pair").first.inner_text()

        # search in the transcripts of every run
        page.goto(viewer)
        page.fill("#search input[name=q]", "80 days ago")
        page.click("#search button[type=submit]")
        page.wait_for_url(re.compile(r"/episodes\?"))
        found = page.locator("#results-list details.ep")
        assert page.inner_text("#results .count") == "4 of 44 episodes shown"
        assert {found.nth(n).get_attribute("data-variant") for n in range(4)} == {
            "support-baseline",
            "support-careful",
        }
        found.first.locator("summary").click()
        assert "80 days ago" in found.first.locator(".chat").inner_text()
        page.screenshot(path=tmp_path / "search.png")
    assert browser.errors == []


def test_the_report_opens_with_the_ab_decision_and_the_gate(
    ab_store: tuple[Path, str, str], tmp_path: Path
) -> None:
    """The answer before the details: verdict, gate and pass rates with their intervals come
    before the first transcript, the run's own figures, the trends and the clusters."""
    store, a, b = ab_store
    html = write_report(store, tmp_path / "report.html", a, "--against", b)
    top = html.index('<section id="decision">')
    details = min(
        html.index(marker)
        for marker in ('class="pair"', 'class="ep"', "text/x-episode", 'id="run-0"', 'id="trends"')
    )
    assert top < details
    head = html[top:details]
    assert "Decision: no detectable difference" in head
    assert re.search(rf"<b>Gate:</b> <span class=\"badge pass\">pass</span> candidate {b}", head)
    assert re.search(r"77\.3%.*17/22.*54\.6%-92\.2%, clustered by 22 tasks", head, re.S)
    assert re.search(r"86\.4%.*19/22", head, re.S)
    assert "B - A: +9.1% by task" in head


def test_bad_input_is_one_line_and_exit_2(
    cli, ab_store: tuple[Path, str, str], tmp_path: Path
) -> None:
    store, a, _ = ab_store
    result = cli("report", "no-such-run", "--store", store, "--out", tmp_path / "r.html")
    assert (result.exit_code, result.stderr) == (2, f"{store}: no run 'no-such-run' in the store\n")
    result = cli("report", a, "--against", "nope", "--store", store, "--out", tmp_path / "r.html")
    assert (result.exit_code, result.stderr) == (2, f"{store}: no run 'nope' in the store\n")
    assert not (tmp_path / "r.html").exists()
    missing_store = tmp_path / "none.db"
    result = cli("view", "--store", missing_store)
    assert result.exit_code == 2
    assert result.stderr == f"{missing_store}: no results store (run an eval first)\n"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli("view", "--store", store, "--port", port)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"harness view: cannot listen on 127.0.0.1:{port}: ")
    assert result.stderr.count("\n") == 1


def test_the_ci_gate_pipeline_writes_the_html_report(tmp_path: Path) -> None:
    """As ci/github-actions.yml runs it: the gate's baseline against its candidate."""
    out = tmp_path / "report.html"
    done = run_cli(
        "run-eval",
        "dags/regression-gate.yaml",
        "--store",
        tmp_path / "results.db",
        "--no-traces",
        "--set",
        f"report.html={out}",
        "--set",
        f"report.markdown={tmp_path / 'gate.md'}",
        "--set",
        f"report.junit={tmp_path / 'gate.xml'}",
    )
    assert done.returncode in (0, 1), done.stderr
    assert f"wrote {out}" in done.stdout
    html = out.read_text()
    assert re.search(r"A/B: support-careful \(B, [\w-]+\) against support-baseline", html)
    gate, pairs = html.find("<b>Gate:</b>"), html.find('id="pairs"')
    assert -1 < html.index('class="big decision">Decision: ') < gate < pairs
    assert 'id="trends"' in html and "Gate decisions, last seven weeks" in html

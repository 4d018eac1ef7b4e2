"""A new user's first hour (the issue of that name): the HTML report opens with its decision,
the viewer never pairs runs that share no task, and a crashed agent's exception is in the run
summary `run-eval` prints. Stores are written by hand here, except for the crash, which is a
real `run-eval` of a python agent that raises."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from harness.grading.result import CheckResult, Verdict
from harness.report.html import build_report, report_html
from harness.store import Store
from harness.transcript import EndReason, Message, Transcript
from harness.view import make_app
from harness.view.pages import run_lines
from tests.conftest import JUDGE, run_cli


def add_run(store: Store, variant: str, outcomes: dict[str, bool]) -> str:
    """A finished run of `variant` with one graded episode per task, created a minute after
    the store's previous run (runs made in one second would have no order); its id."""
    run_id = store.new_run(variant, "0123456789abcdef", {})
    created = f"2026-03-02T09:{len(store.runs()):02d}:00+00:00"
    store.db.write(
        lambda db: db.execute("UPDATE runs SET created_at = ? WHERE id = ?", (created, run_id))
    )
    for task_id, passed in outcomes.items():
        transcript = Transcript(
            task_id=task_id,
            variant=variant,
            variant_hash="0123456789abcdef",
            messages=[
                Message(role="user", content=f"question of {task_id}"),
                Message(role="assistant", content=f"TRANSCRIPT-TEXT {variant} {task_id}"),
            ],
            turns=1,
            end_reason=EndReason.USER_STOP,
        )
        store.add_episode(run_id, transcript)
        outcome = "pass" if passed else "fail"
        check = CheckResult(name="right answer", kind="text", outcome=outcome)
        store.add_verdict(run_id, Verdict(task_id=task_id, outcome=outcome, checks=[check]), "g")
    store.finish_run(run_id)
    return run_id


TASKS = [f"task-{n}" for n in range(6)]


@pytest.fixture
def store(tmp_path: Path):
    results = Store(tmp_path / "results.db")
    yield results
    results.close()


def first(html: str, *needles: str) -> int:
    """Where the first of `needles` appears in the page (each must appear)."""
    found = [html.find(needle) for needle in needles]
    assert -1 not in found, [n for n, at in zip(needles, found, strict=True) if at < 0]
    return min(found)


def test_the_report_opens_with_the_decision_then_the_details(store: Store) -> None:
    a = add_run(store, "prod", {task: n < 3 for n, task in enumerate(TASKS)})
    b = add_run(store, "prod", {task: n < 5 for n, task in enumerate(TASKS)})
    store.add_gate_result(b, a, "prod", False, 5 / 6, ["too few tasks for a decision"])
    html = report_html(build_report(store, a, b))

    decision = first(html, 'class="big decision">Decision: ')
    verdict = first(html, "over 6 tasks, alpha 0.05")
    gate = first(html, "<b>Gate:</b>")
    rates = [first(html, f'<td class="n">{rate}</td>') for rate in ("50.0%", "83.3%")]
    interval = first(html, "clustered by 6 tasks")
    transcripts = first(html, 'class="pair"', 'class="ep"', "TRANSCRIPT-TEXT")
    details = first(html, 'id="ab"', 'id="run-0"', 'id="episodes-0"', 'id="trends"')
    assert max(decision, verdict, gate, *rates, interval) < min(transcripts, details)
    top = html[decision:details]
    assert "too few tasks for a decision" in top
    assert re.search(rf"candidate {b} \(prod\) against baseline {a}", top)
    assert "B - A: +33.3% by task" in top
    # everything else is still there, below
    for kept in ('id="ab"', 'id="pairs"', "McNemar", 'id="run-1"', 'id="trends"'):
        assert kept in html[details:]


def test_a_run_alone_shows_its_gate_first_and_without_a_gate_its_cards(store: Store) -> None:
    alone = add_run(store, "prod", {"task-0": True, "task-1": False})
    html = report_html(build_report(store, alone))
    assert 'id="decision"' not in html  # nothing to decide: the run's cards come first
    assert html.find('class="big pass-rate"') < first(html, 'class="ep"', "TRANSCRIPT-TEXT")

    store.add_gate_result(alone, None, "prod", True, 0.5, [])
    html = report_html(build_report(store, alone))
    gate = first(html, "<b>Gate:</b>")
    assert gate < first(html, 'class="ep"', "TRANSCRIPT-TEXT", 'id="run-0"')
    assert "against baseline none" in html[gate : html.find('id="run-0"')]


def test_runs_that_share_no_task_get_no_ab_but_a_plain_sentence(store: Store) -> None:
    a = add_run(store, "prod", {"task-0": True, "task-1": False})
    b = add_run(store, "prod", {"other-0": True})
    page = build_report(store, a, b)
    assert page.comparison is None and page.pairs == []
    html = report_html(page)
    assert "No A/B: these runs share no task." in html
    assert f"Runs {a} (prod) and {b} (prod) share no task" in html
    assert 'id="ab"' not in html and "over 0 tasks" not in html
    assert html.find("share no task") < first(html, 'class="ep"', "TRANSCRIPT-TEXT")
    assert "Compared with run" not in html  # both runs are shown, each on its own


def test_the_viewer_pairs_only_runs_that_share_a_task(store: Store) -> None:
    first_run = add_run(store, "prod", {"task-0": True, "task-1": False})
    elsewhere = add_run(store, "prod", {"other-0": True})  # same variant, another suite
    again = add_run(store, "prod", {"task-1": True, "task-2": True})
    previous = {line.info.id: line.previous for line in run_lines(store)}
    assert previous == {again: first_run, elsewhere: None, first_run: None}

    client = TestClient(make_app(store.path, port=80), base_url="http://127.0.0.1")
    index = client.get("/")
    assert index.status_code == 200
    assert f"/runs/{first_run}?against={again}" in index.text
    assert f"?against={elsewhere}" not in index.text and f"/runs/{elsewhere}?" not in index.text

    asked = client.get(f"/runs/{first_run}", params={"against": elsewhere})
    assert asked.status_code == 200
    assert "No A/B: these runs share no task." in asked.text
    assert "over 0 tasks" not in asked.text and 'id="ab"' not in asked.text
    # filtering that page keeps both runs on it
    assert f'name="against" value="{elsewhere}"' in asked.text

    paired = client.get(f"/runs/{first_run}", params={"against": again})
    assert 'class="big decision">Decision: ' in paired.text and 'id="ab"' in paired.text


CRASHING_AGENT = """\
def respond(conversation, tools):
    seats = {"aisle": 3}
    return seats["cabin"]
"""


def test_run_eval_prints_the_exception_of_an_agent_that_crashed(tmp_path: Path) -> None:
    (tmp_path / "crashing.py").write_text(CRASHING_AGENT)
    agent = tmp_path / "crashing.yaml"
    agent.write_text("kind: agent\nname: crashing\nrunner: python\nentry: crashing.py:respond\n")
    markdown = tmp_path / "summary.md"
    done = run_cli(
        "run-eval",
        "--tasks",
        "tasks/support",
        "--ids",
        "order-status",
        "--agent",
        agent,
        "--judge-model",
        JUDGE,
        "--store",
        tmp_path / "results.db",
        "--no-traces",
        "--set",
        f"report.markdown={markdown}",
        COLUMNS="200",
    )
    assert done.returncode == 0, done.stderr
    [row] = [line for line in done.stdout.splitlines() if "│ order-status" in line]
    assert "agent_crash" in row
    crash = f"the agent crashed: {tmp_path.name}/crashing.py:3 in respond: KeyError: 'cabin'"
    assert crash in row
    [md_row] = [line for line in markdown.read_text().splitlines() if "| order-status" in line]
    assert crash in md_row

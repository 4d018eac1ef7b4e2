"""Figures that add up (issue 41), replayed on the ferry desk of `tests/helpers/ferry.py` as a
stranger would meet them: a run whose episodes mostly errored says so before any rate and exits
non-zero; a priced judge's cost is one figure of its own in the terminal, the HTML report, the
export, the gate and W&B's metrics; a cost over a budget never prints as equal to or under it;
`compare` refuses runs of different suites as the gate does, and a relative judge that decided
nothing prints no percentage; a passing gate piped to a reader that stops early exits 0.

The ferry project registers its domain as a plug-in, which lives as long as its process, so the
commands run in subprocesses (`run_harness`), in the project's folder."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.compare.money import as_written, usd, usd_against
from harness.testing.fake_server import FakeServer, Faults
from harness.transcript import Message
from tests.conftest import run_harness
from tests.helpers.ferry import FILES, write_ferry_project

JUDGED = "  - kind: llm_judge\n    criterion: The agent says which sailing it booked.\n"
PRICE_IN, PRICE_OUT = 3.0, 15.0  # USD per million tokens of the priced judge
CHEAP_IN, CHEAP_OUT = 0.01, 0.01  # a judge so cheap that four decimals would show $0.0000


def judged_project(root: Path, gate: str = FILES["ci/gate.yaml"]) -> Path:
    """The ferry project with an llm_judge check on two of its three tasks, a second agent
    variant (desk2, the same code) and the gate file `gate`."""
    return write_ferry_project(
        root,
        {
            "tasks/book-car.yaml": FILES["tasks/book-car.yaml"] + JUDGED,
            "tasks/full-sailing.yaml": FILES["tasks/full-sailing.yaml"] + JUDGED,
            "agents/desk2.yaml": FILES["agents/desk.yaml"].replace("name: desk", "name: desk2"),
            "ci/gate.yaml": gate,
        },
    )


def judge_of(server: FakeServer) -> str:
    return f"{{id: openai/fake-model, base_url: '{server.url}/v1'}}"


def newest_run(store: Path) -> str:
    with sqlite3.connect(store) as db:
        return db.execute("SELECT id FROM runs ORDER BY rowid DESC").fetchone()[0]


def no_crash(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stdout + done.stderr, done.stderr


async def says_booked(messages: list[Message]) -> Message:
    """A judge that decides every criterion: passed, in the JSON the judge prompt asks for."""
    return Message(role="assistant", content='{"reasoning": "It names S-1.", "passed": true}')


# 1. a run whose episodes mostly errored ---------------------------------------------------


def test_a_run_whose_episodes_too_many_errors_says_so_before_the_rate_and_exits_3(
    tmp_path: Path,
) -> None:
    """A judge that refuses every call (401) leaves two of three episodes without evidence:
    the summary says so before the pass rate, the rate counts every episode, and the run exits
    3 (the judge failed, not the agent). Before: 'pass rate 100.0% (1/1 episodes)', exit 0."""
    project = judged_project(tmp_path)
    with FakeServer(faults=Faults(rate_401_echo=1.0)).running() as server:
        done = run_harness(
            "run-eval", "--tasks", "tasks", "--agent", "agents/desk.yaml", "--judge-model",
            judge_of(server), "--store", "r.db", "--no-traces", cwd=project, COLUMNS="200",
        )  # fmt: skip
    no_crash(done)
    assert done.returncode == 3, done.stdout + done.stderr
    out = done.stdout
    errored = "2 of 3 episodes errored (judge 2): more than the 5% a gate accepts"
    assert errored in out
    assert out.index(errored) < out.index("pass rate"), "said before any rate"
    assert "pass rate 100.0% (1/1 graded of 3 episodes" in out
    assert "(1/1 episodes" not in out
    assert re.search(
        r"run \S+: 2 of 3 episodes errored \(judge 2\), more than the 5% a gate accepts: the "
        r"harness or what it runs on .* failed, not the agent \(exit 3\)",
        out,
    ), out

    from harness.report.json_summary import results_summary
    from harness.store import Store

    store = Store(project / "r.db")
    try:  # what --json gives a script: the same figures
        [run] = results_summary(store, [newest_run(project / "r.db")]).runs
    finally:
        store.close()
    assert (run.episodes, run.graded, run.errors, run.too_many_errors) == (3, 1, 2, True)


def test_an_agent_returning_none_fails_those_episodes_and_the_rate_counts_them(
    tmp_path: Path,
) -> None:
    """The original mistake: an agent that returns None is the agent's failure (issue 37), so
    the episodes are graded fails and the rate is over every episode, not over the one that
    passed."""
    agent = FILES["agent.py"].replace(
        '    said = " "', '    if "Ada" not in conversation[0]["content"]:\n'
        '        return None\n    said = " "',
    )  # fmt: skip
    project = write_ferry_project(tmp_path, {"agent.py": agent})
    done = run_harness(
        "run-eval", "--tasks", "tasks", "--agent", "agents/desk.yaml", "--store", "r.db",
        "--no-traces", cwd=project, COLUMNS="250",
    )  # fmt: skip
    no_crash(done)
    assert "pass rate 33.3% (1/3 episodes" in done.stdout, done.stdout
    assert "the agent returned None" in done.stdout
    assert "errored" not in done.stdout


# 2. one cost figure per role, everywhere ----------------------------------------------------


@dataclass
class Priced:
    """The ferry project graded by a priced judge: two runs (desk, then desk2)."""

    project: Path
    baseline: str
    candidate: str
    eval_out: str


def prices(project: Path, price_in: float, price_out: float) -> Path:
    path = project / "prices.yaml"
    path.write_text(f"openai/fake-model: {{input: {price_in}, output: {price_out}}}\n")
    return path


def priced_runs(root: Path, price_in: float, price_out: float, gate: str) -> Priced:
    project = judged_project(root, gate)
    price_file = prices(project, price_in, price_out)
    runs, out = [], ""
    with FakeServer(responder=says_booked).running() as server:
        for agent in ("agents/desk.yaml", "agents/desk2.yaml"):
            done = run_harness(
                "run-eval", "--tasks", "tasks", "--agent", agent, "--judge-model",
                judge_of(server), "--prices", price_file, "--store", "r.db", "--no-traces",
                "--no-cache", cwd=project, COLUMNS="200",
            )  # fmt: skip
            no_crash(done)
            assert done.returncode == 0, done.stdout + done.stderr
            runs.append(newest_run(project / "r.db"))
            out = done.stdout
    return Priced(project, runs[0], runs[1], out)


@pytest.fixture(scope="module")
def priced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Priced]:
    yield priced_runs(
        tmp_path_factory.mktemp("priced"), PRICE_IN, PRICE_OUT, FILES["ci/gate.yaml"]
    )


def judge_cost(priced: Priced) -> float:
    """The judge's whole cost of the candidate run, from the export."""
    done = run_harness("export", priced.candidate, "--store", "r.db", cwd=priced.project)
    assert done.returncode == 0, done.stderr
    return sum(json.loads(line)["judge_cost_usd"] for line in done.stdout.splitlines())


def test_run_eval_prints_each_roles_cost_and_the_total(priced: Priced) -> None:
    out = priced.eval_out
    match = re.search(r"judge: 2 model calls, [\d,]+ input and [\d,]+ output tokens, \$(\S+)", out)
    assert match, out
    assert float(match.group(1)) > 0
    assert "agent: 0 model calls, 0 input and 0 output tokens, $0.0000" in out
    assert f"cost {usd(judge_cost(priced))} (agent, user simulator and judge)" in out


def test_export_has_the_judges_cost_per_episode_and_cost_usd_is_the_total(priced: Priced) -> None:
    """Before: `cost_usd` 0.0 on every row, the judge's cost nowhere."""
    for form in ("jsonl", "csv"):
        done = run_harness("export", priced.candidate, "--format", form, "--store", "r.db",
                           cwd=priced.project)  # fmt: skip
        no_crash(done)
        assert done.returncode == 0, done.stderr
        if form == "jsonl":
            rows = [json.loads(line) for line in done.stdout.splitlines()]
        else:
            import csv
            import io

            rows = list(csv.DictReader(io.StringIO(done.stdout)))
        judged = {r["task"]: float(r["judge_cost_usd"]) for r in rows}
        assert judged["book-foot"] == 0 and judged["book-car"] > 0 and judged["full-sailing"] > 0
        for row in rows:
            parts = [float(row[k]) for k in ("agent_cost_usd", "user_cost_usd", "judge_cost_usd")]
            assert float(row["cost_usd"]) == pytest.approx(sum(parts))
            assert int(row["judge_input_tokens"]) > 0 or row["task"] == "book-foot"


def test_the_html_report_shows_the_judges_cost(priced: Priced) -> None:
    """Before: '$0.0000 agent $0.0000, user $0.0000' with a judge that cost money."""
    done = run_harness("report", priced.candidate, "--out", "report.html", "--store", "r.db",
                       cwd=priced.project)  # fmt: skip
    no_crash(done)
    assert done.returncode == 0, done.stderr
    html = (priced.project / "report.html").read_text()
    spent = judge_cost(priced)
    assert f"agent $0.0000, user $0.0000, judge {usd(spent)}" in html
    assert re.search(rf"<td>judge</td><td class=\"n\">2</td>.*?{re.escape(usd(spent))}", html)
    # each judged episode's own cost counts its judge too (before: the agent's alone, $0.0000)
    row = re.search(r'data-task="book-car".*?<span>\$([\d.]+)</span>', html)
    assert row is not None and float(row.group(1)) > 0, html


def test_wandb_metrics_have_a_cost_per_role(priced: Priced) -> None:
    from harness.pipeline.nodes.log_wandb import metrics
    from harness.pipeline.types import Graded
    from harness.store import Store

    store = Store(priced.project / "r.db")
    try:
        info = store.run(priced.candidate)
        assert info is not None
        graded = Graded(
            run_id=priced.candidate, variant="desk2", variant_hash=info.variant_hash,
            episodes=3, counts={"pass": 3},
        )  # fmt: skip
        summary, _ = metrics(store, [graded])
    finally:
        store.close()
    assert summary["desk2/judge_cost_usd"] == pytest.approx(judge_cost(priced))
    assert summary["desk2/judge_cost_usd"] > 0
    assert summary["desk2/cost_usd"] == pytest.approx(
        summary["desk2/agent_cost_usd"] + summary["desk2/user_cost_usd"]
        + summary["desk2/judge_cost_usd"]
    )  # fmt: skip


# 3. rounding that never contradicts the comparison --------------------------------------------


def test_a_cost_over_a_tiny_budget_prints_over_it(tmp_path: Path) -> None:
    """Before: '$0.0000 per episode is over the budget of $1e-05'."""
    gate = FILES["ci/gate.yaml"] + "budgets: {cost_usd_per_episode: 0.0000005}\n"
    cheap = priced_runs(tmp_path, CHEAP_IN, CHEAP_OUT, gate)
    done = run_harness("gate", "--store", "r.db", "--candidate", cheap.candidate, "--baseline",
                       cheap.baseline, "--no-play", cwd=cheap.project, COLUMNS="300")  # fmt: skip
    no_crash(done)
    assert done.returncode == 1, done.stdout + done.stderr
    match = re.search(
        r"cost budget: \$(\S+) per episode \(agent \$0\.0000, user \$0\.0000, judge \$(\S+)\) "
        r"is over the budget of \$0\.0000005\b",
        done.stdout,
    )
    assert match, done.stdout
    assert float(match.group(1)) > 0.0000005 and float(match.group(2)) > 0
    assert "1e-" not in done.stdout and "$0.0000 per episode" not in done.stdout


@pytest.mark.parametrize("limit", [0.00001, 0.0001, 0.001, 0.5, 1.0])
def test_printed_costs_stand_on_the_side_of_the_budget_their_value_does(limit: float) -> None:
    steps = [limit * (1 + d) for d in (-1e-3, -1e-6, 0.0, 1e-9, 1e-6, 1e-3, 0.5)]
    for value in [*steps, 0.0, limit / 3, limit * 3]:
        shown = float(usd_against(value, limit).removeprefix("$"))
        assert (shown > limit) == (value > limit), (value, limit, usd_against(value, limit))
    assert "e" not in as_written(limit)
    assert float(as_written(limit)) == limit


def test_small_costs_keep_two_significant_digits() -> None:
    assert (usd(0.0), usd(0.01234), usd(0.0000123), usd(2.5)) == (
        "$0.0000", "$0.0123", "$0.000012", "$2.5000",
    )  # fmt: skip
    assert (as_written(1e-05), as_written(0.5), as_written(2.0)) == ("0.00001", "0.5", "2")


# 4. compare of runs of different suites ------------------------------------------------------


@pytest.fixture(scope="module")
def two_suites(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A ferry run of every task (desk), and one of two tasks (desk2)."""
    project = judged_project(tmp_path_factory.mktemp("suites"))
    (project / "undecided.yaml").write_text("kind: script\nrules:\n  - reply: I cannot tell.\n")
    runs = []
    for agent, ids in (("agents/desk.yaml", []), ("agents/desk2.yaml", ["--ids", "book-foot,book-car"])):
        done = run_harness("run-eval", "--tasks", "tasks", "--agent", agent, *ids, "--judge-model",
                           "{id: scripted, script: undecided.yaml}", "--store", "r.db",
                           "--no-traces", cwd=project)  # fmt: skip
        no_crash(done)
        runs.append(newest_run(project / "r.db"))
    return project, runs[0], runs[1]


def test_compare_refuses_runs_of_different_suites_as_the_gate_does(
    two_suites: tuple[Path, str, str],
) -> None:
    """Before: compared on the shared tasks without a word, exit 0."""
    project, a, b = two_suites
    done = run_harness("compare", a, b, "--store", "r.db", cwd=project, COLUMNS="300")
    no_crash(done)
    assert done.returncode == 2
    assert done.stdout == ""
    [line] = done.stderr.strip().splitlines()
    assert line == (
        f"compare: runs {a} (A) and {b} (B) ran different suites (only in A: full-sailing); "
        "pass --allow-suite-change to compare them on the 2 tasks they share"
    )
    gate = run_harness("gate", "--store", "r.db", "--candidate", b, "--baseline", a, cwd=project)
    assert gate.returncode == 2 and "different suites" in gate.stderr


def test_compare_on_shared_tasks_says_so_first_and_an_undecided_judge_gives_no_rate(
    two_suites: tuple[Path, str, str],
) -> None:
    """Before: 'relative judge: B wins 50.0%' from no judgement at all."""
    project, a, b = two_suites
    done = run_harness(
        "compare", a, b, "--allow-suite-change", "--judge-model",
        "{id: scripted, script: undecided.yaml}", "--store", "r.db", "--markdown", "ab.md",
        cwd=project, COLUMNS="300",
    )  # fmt: skip
    no_crash(done)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (
        "compared on the 2 tasks both suites share (book-car, book-foot); only in A: full-sailing"
    )
    assert "relative judge: no judgements (2 judge errors)" in done.stdout
    assert "B wins" not in done.stdout
    markdown = (project / "ab.md").read_text()
    assert "compared on the 2 tasks both suites share" in markdown
    assert "Relative judge: no judgements (2 judge errors)." in markdown


# 5. a passing gate piped to a reader that stops early ---------------------------------------


def test_a_passing_gate_whose_reader_went_away_exits_0(priced: Priced) -> None:
    """Before: exit 1 under `| head -1` (SIGPIPE). The reader closes its end before the gate
    writes a line, so every write finds the pipe closed."""
    command = [sys.executable, "-m", "harness", "gate", "--store", "r.db", "--candidate",
               priced.candidate, "--baseline", priced.baseline, "--no-play"]  # fmt: skip
    alone = subprocess.run(command, cwd=priced.project, capture_output=True, text=True)
    assert alone.returncode == 0 and "gate: PASS" in alone.stdout, alone.stdout + alone.stderr
    process = subprocess.Popen(
        command, cwd=priced.project, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=180) == 0, stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr

    shell = subprocess.run(
        ["bash", "-c", f"{' '.join(command)} | head -1; echo ${{PIPESTATUS[0]}}"],
        cwd=priced.project, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    first, code = shell.stdout.splitlines()
    assert first.startswith(f"candidate {priced.candidate}") and code == "0", shell.stderr

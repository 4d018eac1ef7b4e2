"""Issue 41, replayed on the ferry desk (a project written in the tests): a stranger's python
agent that deadlocks, blocks, loops for ever, raises, or is stopped with Ctrl-C. The user's
agent code never runs on the harness's event loop, so every episode limit holds from outside
it, Ctrl-C stops the run within seconds keeping what finished, and a crash names its line.

These run the real command in a subprocess (`run_harness`): the ferry project's domain is a
plug-in, which registers for the life of a process."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.domains import Environment, tool
from harness.models import ModelRuntime
from harness.sim.agent import make_agent
from harness.sim.episode import EpisodeSpec, run_episode
from harness.sim.suite import load_cases
from harness.specs.load import load_agent
from harness.transcript import EndReason, Transcript
from tests.conftest import run_harness
from tests.helpers.ferry import AGENT, write_ferry_project

RUN = ("run-eval", "--tasks", "tasks", "--agent", "agents/desk.yaml", "--store", "r.db")
RUN += ("--no-traces", "--no-cache")


def broken(replaced: str, by: str, agent: str = AGENT) -> str:
    """The ferry agent with one piece of it replaced (which must be there)."""
    assert replaced in agent
    return agent.replace(replaced, by, 1)


def stored(project: Path) -> list[dict]:
    """Every stored episode's transcript."""
    with sqlite3.connect(project / "r.db") as db:
        rows = db.execute("SELECT transcript FROM episodes ORDER BY task_id").fetchall()
    return [json.loads(row[0]) for row in rows]


ASYNC = broken("def respond(", "async def respond(")
SAME_LOOP = (
    "    import asyncio\n"
    "    LOOPS.add(asyncio.get_running_loop())\n"
    "    assert len(LOOPS) == 1, 'a second event loop'\n"
    "    said = "
)
ONE_LOOP = broken("NAME = ", "LOOPS: set = set()\nNAME = ", broken("    said = ", SAME_LOOP, ASYNC))


@pytest.mark.parametrize(
    "agent",
    [
        ASYNC,  # the sync `tools.call` in async code: it deadlocked the harness's loop
        # the way the docstring prefers; every call on the same agent loop, so that a client
        # the module creates (and binds to the loop it first runs on) keeps working
        ONE_LOOP.replace("tools.call(", "await tools.acall("),
    ],
    ids=["tools.call", "tools.acall"],
)
def test_an_async_respond_calling_tools_plays_and_passes(tmp_path: Path, agent: str) -> None:
    project = write_ferry_project(tmp_path, {"agent.py": agent})
    started = time.monotonic()
    done = run_harness(*RUN, "--set", "task.end.max_seconds=20", cwd=project)
    assert done.returncode == 0, done.stderr
    assert "pass rate 100.0% (3/3 episodes" in done.stdout
    assert time.monotonic() - started < 60
    assert [t["end_reason"] for t in stored(project)] == ["user_stop"] * 3


SLEEP = "    import time\n    time.sleep(120)\n    said = "
BLOCKING = {
    "sync-sleep": broken("    said = ", SLEEP),
    "async-sleep": broken("    said = ", SLEEP, ASYNC),
    "endless-loop": broken("    said = ", "    while True:\n        pass\n    said = "),
}


@pytest.mark.parametrize("name", list(BLOCKING))
def test_an_agent_that_never_answers_ends_at_the_tasks_time_limit(
    tmp_path: Path, name: str
) -> None:
    project = write_ferry_project(tmp_path, {"agent.py": BLOCKING[name]})
    started = time.monotonic()
    done = run_harness(*RUN, "--set", "task.end.max_seconds=2", cwd=project)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr  # the run goes on and finishes: no gate to fail
    assert "Traceback" not in done.stderr
    assert elapsed < 60, elapsed  # the stuck threads are abandoned, not waited for
    assert "pass rate 0.0% (0/3 episodes" in done.stdout
    episodes = stored(project)
    assert [t["end_reason"] for t in episodes] == ["agent_crash"] * 3
    reasons = {t["error"]["message"] for t in episodes}
    assert all(
        r.startswith("the agent did not answer within 2 s (the task's end.max_seconds)")
        for r in reasons
    ), reasons
    if name == "async-sleep":  # every async agent waits behind a blocked loop: say why
        assert any("blocking code in its async def stops its event loop" in r for r in reasons)
    assert "the agent did not answer within 2 s" in done.stdout


def test_ctrl_c_stops_a_run_within_seconds_keeping_the_finished_episodes(
    tmp_path: Path,
) -> None:
    # Cy's episode (the last of the three, played one at a time) is stuck while `stuck` exists
    stuck = (
        "    if name.group(1) == 'Cy' and __import__('os').path.exists('stuck'):\n"
        "        __import__('time').sleep(600)\n    vehicle = "
    )
    project = write_ferry_project(
        tmp_path, {"agent.py": broken("    vehicle = ", stuck), "stuck": ""}
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "harness", *RUN, "--concurrency", "1"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        assert "started" in process.stderr.readline()
        deadline = time.monotonic() + 60
        while len(stored(project)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)  # Ada's and Bo's episodes are stored as they finish
        assert len(stored(project)) == 2
        process.send_signal(signal.SIGINT)
        interrupted = time.monotonic()
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert time.monotonic() - interrupted < 10
    assert process.returncode == 130
    pipeline = next(line for line in err.splitlines() if line.startswith("harness: interrupted"))
    assert pipeline.startswith(
        "harness: interrupted: 2 finished episodes stored; resume with: harness run-eval "
        "--resume dag-"
    )
    assert pipeline.endswith(" --store r.db")
    assert "Traceback" not in err and "Aborted" not in err and out == ""  # no summary
    assert sorted(t["task_id"] for t in stored(project)) == ["book-car", "book-foot"]

    # the command it names plays only the missing episode, into the same run
    (project / "stuck").unlink()
    resumed = run_harness(*pipeline.split("resume with: harness ")[1].split(), cwd=project)
    assert resumed.returncode == 0, resumed.stderr
    assert "pass rate 100.0% (3/3 episodes" in resumed.stdout
    with sqlite3.connect(project / "r.db") as db:
        assert db.execute("SELECT COUNT(DISTINCT run_id), COUNT(*) FROM episodes").fetchone() == (
            1,
            3,
        )


CRASHING = broken(
    "    return f\"Booked {ticket['traveller']}",
    "    return booked(ticket)\n\n\ndef booked(ticket):\n    return f\"Booked {ticket['id']}",
)


@pytest.mark.parametrize("debug", ["", "1"])
def test_an_agent_that_raises_is_shown_at_its_file_and_line(tmp_path: Path, debug: str) -> None:
    project = write_ferry_project(tmp_path, {"agent.py": CRASHING})
    lines = CRASHING.splitlines()
    inner = next(n for n, line in enumerate(lines, 1) if "ticket['id']" in line)
    outer = next(n for n, line in enumerate(lines, 1) if "return booked(ticket)" in line)
    done = run_harness(*RUN, cwd=project, HARNESS_DEBUG=debug)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    reason = f"the agent crashed: agent.py:{inner} in booked: KeyError: 'id'"
    assert reason in done.stdout
    crashed = [t for t in stored(project) if t["end_reason"] == "agent_crash"]
    assert [t["task_id"] for t in crashed] == ["book-car", "book-foot"]
    for transcript in crashed:
        assert transcript["error"] == {
            "side": "agent",
            "message": f"agent.py:{inner} in booked: KeyError: 'id'",
            "detail": f"agent.py:{inner} in booked\nagent.py:{outer} in respond",
        }


class NoteDesk(Environment):
    """A desk with one tool, for code that calls it too late."""

    domain = "note-desk"

    @tool
    def note(self, text: str) -> dict[str, Any]:
        """Write a note into the state (and into NOTES, which outlives the episode)."""
        self.state["note"] = text
        NOTES.append(text)
        return {"noted": text}

    @tool
    async def wait(self) -> dict[str, Any]:
        """A tool whose back end is slower than the episode's time limit."""
        await asyncio.sleep(3600)
        return {}

    tool_timeout_s = 3600


NOTES: list[str] = []


def late_episode(tmp_path: Path, respond: str) -> Transcript:
    """One episode of the note desk with a 0.5 s limit, by an agent whose `respond` body is
    given; the harness's loop runs 2 s more after it, as it would play other episodes."""
    (tmp_path / "task.yaml").write_text(
        f"kind: task\nid: late\ntitle: a late note\nlevel: 1\ndomain: {__name__}:NoteDesk\n"
        "persona: {name: p, model: scripted, scripted_turns: [{reply: 'thanks ###STOP###'}]}\n"
        "scenario: {reason: a note}\n"
        "start: {first_message: 'Note this, please.'}\n"
        "end: {max_seconds: 0.5}\n"
        "checks:\n  - {kind: tool_called, tool: note}\n"
    )
    (tmp_path / "agent.py").write_text(
        f"import time\n\n\ndef respond(conversation, tools):\n{respond}"
    )
    (tmp_path / "agent.yaml").write_text(
        "kind: agent\nname: late\nrunner: python\nentry: agent.py:respond\n"
    )
    [case] = load_cases([tmp_path / "task.yaml"])

    async def go() -> Transcript:
        spec = EpisodeSpec(
            task=case.task,
            persona=case.persona,
            agent=make_agent(load_agent(tmp_path / "agent.yaml").spec, ModelRuntime()),
            variant_hash="h",
            initial_state=case.state,
        )
        transcript = await run_episode(spec)
        await asyncio.sleep(2)  # the harness's loop still runs when the stuck code wakes up
        return transcript

    started = time.monotonic()
    transcript = asyncio.run(go())
    assert time.monotonic() - started < 10
    return transcript


def test_abandoned_agent_code_calling_a_tool_after_its_time_limit_changes_nothing(
    tmp_path: Path,
) -> None:
    transcript = late_episode(
        tmp_path, "    time.sleep(1.5)\n    tools.call('note', text='too late')\n    return 'ok'\n"
    )
    assert transcript.end_reason == EndReason.AGENT_CRASH and transcript.error is not None
    assert transcript.error.message == (
        "the agent did not answer within 0.5 s (the task's end.max_seconds)"
    )
    assert NOTES == []  # the late call never ran
    assert "note" not in transcript.final_state
    assert [m.role for m in transcript.messages] == ["user"]


def test_a_tool_slower_than_the_time_limit_is_no_failure_of_the_agent(tmp_path: Path) -> None:
    transcript = late_episode(tmp_path, "    tools.call('wait')\n    return 'ok'\n")
    assert transcript.end_reason == EndReason.TIMEOUT and transcript.error is None
    assert [c.name for c in transcript.tool_calls()] == ["wait"]

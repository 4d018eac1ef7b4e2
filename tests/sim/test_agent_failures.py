"""Issue 37: the agent's own failures are `fail` verdicts, counted in every pass rate; missing
evidence stays an `error`. A python agent that returns something that is not a reply (None, a
number, a dict without string content) and an `http` agent whose service fails (500) fail the
episode; an `http` service still rate limited (429) and an `llm` agent's model provider still
failing (503) after the retries are errors of the `agent_model` side, never fails. All through
`harness run-eval`, against a local server on 127.0.0.1."""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from harness.domains import Environment, tool
from harness.grading.result import Verdict
from harness.store import Store
from harness.transcript import EndReason, Side
from tests.conftest import newest_run, run_cli

REPLY = "a str, or a dict whose 'content' is a str"
BROKEN = "this one is broken"  # the first message of the task the agent breaks on


class Desk(Environment):
    """A desk with one tool: the tasks only read the agent's words."""

    domain = "agent-failures-desk"

    @tool
    def note(self, text: str) -> dict[str, Any]:
        """Write a note."""
        self.state["note"] = text
        return {"noted": text}


def write_tasks(tmp_path: Path) -> Path:
    """Two tasks: `fine`, which an agent saying hello passes, and `broken`, where it breaks."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    for task_id, first in (("fine", "hello?"), ("broken", BROKEN)):
        (tasks / f"{task_id}.yaml").write_text(
            f"kind: task\nid: {task_id}\ntitle: {task_id}\nlevel: 1\ndomain: {__name__}:Desk\n"
            "persona: {name: p, model: scripted, scripted_turns: [{reply: 'bye ###STOP###'}]}\n"
            f"scenario: {{reason: say hello}}\nstart: {{first_message: '{first}'}}\n"
            "checks:\n  - {kind: text, contains: hello}\n  - {kind: no_error}\n"
        )
    return tasks


def run_eval(
    tmp_path: Path, agent: Path, *extra: str, code: int = 0
) -> tuple[str, dict[str, Verdict]]:
    """`run-eval` of the two tasks by the agent (1 trial, 1 retry), which exits `code` (3 when
    half the episodes errored: more than a gate accepts): its stdout, and the stored verdict of
    each task."""
    store = tmp_path / "results.db"
    done = run_cli(
        "run-eval",
        "--tasks",
        write_tasks(tmp_path),
        "--agent",
        agent,
        "--store",
        store,
        "--no-cache",
        "--no-traces",
        "--retries",
        "1",
        "--timeout",
        "5",
        *extra,
        COLUMNS="300",
    )
    assert done.returncode == code, done.stdout + done.stderr
    results = Store(store)
    try:
        verdicts = {v.task_id: v for v in results.latest_verdicts(newest_run(store))}
        transcripts = {t.task_id: t for t, _, _ in results.transcripts(newest_run(store))}
    finally:
        results.close()
    assert sorted(verdicts) == sorted(transcripts) == ["broken", "fine"]
    assert verdicts["fine"].outcome == "pass", verdicts["fine"].reason
    broken = transcripts["broken"]
    failed = verdicts["broken"].outcome == "fail"
    assert broken.end_reason == (EndReason.AGENT_CRASH if failed else EndReason.ERROR)
    return done.stdout, verdicts


def summary_row(stdout: str, task_id: str) -> str:
    [row] = [line for line in stdout.splitlines() if re.search(rf"\b{task_id}\b", line)]
    return row


# ------------------------------------------------------------------ runner: python


@pytest.mark.parametrize(
    ("returned", "named"),
    [
        ("None", "None"),
        ("42", "int 42"),
        ("{'text': 'hello'}", "a dict without 'content' (keys: 'text')"),
        ("{'content': None}", "a dict whose 'content' is None"),
    ],
)
def test_a_python_agent_returning_no_reply_fails_the_task(
    tmp_path: Path, returned: str, named: str
) -> None:
    (tmp_path / "bot.py").write_text(
        "def respond(conversation, tools):\n"
        f"    if conversation[-1]['content'] == {BROKEN!r}:\n"
        f"        return {returned}\n"
        "    return {'content': 'hello there'}\n"
    )
    agent = tmp_path / "agent.yaml"
    agent.write_text("kind: agent\nname: bot\nrunner: python\nentry: bot.py:respond\n")
    stdout, verdicts = run_eval(tmp_path, agent)
    reason = f"the agent returned {named}, not a reply ({REPLY})"
    broken = verdicts["broken"]
    assert (broken.outcome, broken.error_side, broken.reason) == ("fail", None, reason)
    # the no_error check says the same; the text check found no hello
    assert {c.name: c.reason for c in broken.failed_checks()}["no_error"] == reason
    # counted: 1 of 2 tasks passed, no error set aside
    assert "pass rate 50.0% (1/2" in stdout, stdout
    assert "errors" not in stdout.split("pass rate", 1)[1].split("\n", 1)[0]
    assert reason in summary_row(stdout, "broken")


def test_a_python_agent_replying_in_text_or_content_still_passes(tmp_path: Path) -> None:
    (tmp_path / "bot.py").write_text(
        "def respond(conversation, tools):\n"
        f"    if conversation[-1]['content'] == {BROKEN!r}:\n"
        "        return 'hello, sorry: broken'\n"
        "    return {'role': 'assistant', 'content': 'hello there'}\n"
    )
    agent = tmp_path / "agent.yaml"
    agent.write_text("kind: agent\nname: bot\nrunner: python\nentry: bot.py:respond\n")
    store = tmp_path / "results.db"
    done = run_cli(
        "run-eval", "--tasks", write_tasks(tmp_path), "--agent", agent, "--store", store,
        "--no-traces", COLUMNS="300",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "pass rate 100.0% (2/2" in done.stdout, done.stdout


# ------------------------------------------------------------------ a local endpoint


class Endpoint:
    """An OpenAI-compatible chat endpoint on 127.0.0.1 (the standard library's HTTP server):
    a completion saying hello, except to a conversation whose last user message is BROKEN,
    which gets `status` (429 with `Retry-After: 0`). Counts the requests per answer."""

    def __init__(self, status: int):
        self.status = status
        self.answered: Counter[int] = Counter()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                users = [m["content"] for m in body["messages"] if m["role"] == "user"]
                broken = users and users[-1] == BROKEN
                status = endpoint.status if broken else 200
                endpoint.answered[status] += 1
                payload: dict[str, Any] = (
                    {"error": {"message": f"answered {status}", "type": "server"}}
                    if broken
                    else {
                        "id": "c-1",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": "hello there"},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
                    }
                )
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                if status == 429:
                    self.send_header("retry-after", "0")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @contextmanager
    def running(self) -> Iterator[Endpoint]:
        thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.server.shutdown()
            self.server.server_close()
            thread.join(10)


def agent_file(tmp_path: Path, runner: str, url: str) -> Path:
    path = tmp_path / f"{runner}.yaml"
    path.write_text(
        f"kind: agent\nname: {runner}-bot\nrunner: {runner}\nsystem_prompt: Say hello.\n"
        f"model: {{id: openai/bot, base_url: '{url}'}}\n"
    )
    return path


# ------------------------------------------------------------------ runner: http


def test_an_http_agent_whose_service_answers_500_fails_the_task(tmp_path: Path) -> None:
    with Endpoint(500).running() as endpoint:
        stdout, verdicts = run_eval(tmp_path, agent_file(tmp_path, "http", endpoint.url))
    assert endpoint.answered == {200: 1, 500: 2}, "the 500 was retried once, then given up"
    broken = verdicts["broken"]
    assert (broken.outcome, broken.error_side) == ("fail", None)
    assert broken.reason.startswith("the agent service failed: agent model openai/bot: HTTP 500")
    assert broken.reason.endswith("answered 500 after 2 attempts")
    assert "pass rate 50.0% (1/2" in stdout, stdout
    assert "the agent service failed: agent model openai/bot: HTTP 500" in summary_row(
        stdout, "broken"
    )


def test_an_http_agent_still_rate_limited_is_an_error_not_a_fail(tmp_path: Path) -> None:
    with Endpoint(429).running() as endpoint:
        stdout, verdicts = run_eval(tmp_path, agent_file(tmp_path, "http", endpoint.url), code=3)
    assert endpoint.answered == {200: 1, 429: 2}
    broken = verdicts["broken"]
    assert (broken.outcome, broken.error_side) == ("error", Side.AGENT_MODEL)
    assert broken.reason.startswith(
        "the agent service is rate limited: agent model openai/bot: HTTP 429"
    )
    assert broken.reason.endswith("answered 429 after 2 attempts")
    # excluded from the pass rate, reported by its side
    assert "pass rate 100.0% (1/1" in stdout, stdout
    assert "errors 1 (agent_model 1)" in stdout, stdout
    assert "[agent_model] the agent service is rate limited" in summary_row(stdout, "broken")


# ------------------------------------------------------------------ runner: llm


def test_an_llm_agents_provider_answering_503_is_an_error_naming_the_provider(
    tmp_path: Path,
) -> None:
    with Endpoint(503).running() as endpoint:
        stdout, verdicts = run_eval(tmp_path, agent_file(tmp_path, "llm", endpoint.url), code=3)
    assert endpoint.answered == {200: 1, 503: 2}
    broken = verdicts["broken"]
    assert (broken.outcome, broken.error_side) == ("error", Side.AGENT_MODEL)
    assert broken.reason.startswith(
        "the agent's model provider failed: agent model openai/bot: HTTP 503"
    )
    assert broken.reason.endswith("answered 503 after 2 attempts")
    assert "pass rate 100.0% (1/1" in stdout, stdout
    assert "errors 1 (agent_model 1)" in stdout, stdout

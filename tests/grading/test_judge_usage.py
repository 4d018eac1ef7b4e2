"""Judge calls are accounted (issue 24): every reply an LLM judge gave to grade an episode,
retries and unparseable replies included, is in the verdict's `judge_usage()`, with its cost from
the price table (or the judge named as unpriced), and it survives the results store."""

from __future__ import annotations

import asyncio
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from harness.grading.checks import CheckContext, run_check
from harness.grading.judge import criterion_prompt, pairwise_prompt, task_domain
from harness.grading.normative import grade
from harness.grading.relative import compare_pair
from harness.grading.result import CheckResult, Finding, Verdict
from harness.models import CallPolicy, ModelError, ModelRuntime, PriceTable, ResponseCache
from harness.models.scripted import ScriptedModel
from harness.specs.agent import ModelRef
from harness.specs.load import load_script
from harness.specs.script import Script
from harness.specs.task import Task
from harness.store import Store
from harness.testing.fake_server import FakeServer, Faults
from harness.transcript import EndReason, Message, Side, Transcript, Usage
from tests.conftest import SCRIPTED

SCRIPTED_JUDGE = ModelRef(id="scripted", script="agents/scripts/judge.yaml")
EXPLAINS = "The agent explains why the refund cannot be made."
FRIENDLY = "The agent is friendly."  # the bundled judge script answers this with no JSON
FAST = CallPolicy(timeout_s=5, max_retries=0, backoff_base_s=0.01, backoff_max_s=0.05)
PRICE_IN, PRICE_OUT = 3.0, 15.0  # USD per million tokens, in the test's prices file


def episode(final: str = "Sorry, that is outside our 30-day refund window.") -> Transcript:
    return Transcript(
        task_id="t",
        variant="v",
        variant_hash="h",
        end_reason=EndReason.USER_STOP,
        messages=[
            Message(role="user", content="Refund order O-1 please."),
            Message(role="assistant", content=final),
        ],
        turns=1,
    )


def task(*checks: dict) -> Task:
    return Task.model_validate(
        {
            "kind": "task",
            "id": "t",
            "title": "t",
            "level": 1,
            "domain": "support",
            "persona": "polite",
            "scenario": {"reason": "A refund for O-1.", "instructions": "Insist once."},
            "checks": list(checks),
        }
    )


def words(messages: list[Message]) -> int:
    """Input tokens as the scripted model and the fake server count them."""
    return sum(len(m.content.split()) for m in messages)


def prompt(criterion: str, the_task: Task, transcript: Transcript) -> list[Message]:
    return criterion_prompt(criterion, "", transcript, task_domain(the_task))


def stored_rows(tmp_path: Path, transcript: Transcript, verdict: Verdict) -> list:
    """Store an episode and its verdict, and read the episode back as summaries do."""
    store = Store(tmp_path / "results.db")
    try:
        run_id = store.new_run("v", "h", {})
        store.add_episode(run_id, transcript)
        store.add_verdict(run_id, verdict, "grading-1")
        assert list(store.latest_verdicts(run_id)) == [verdict]
        return list(store.episode_rows(run_id))
    finally:
        store.close()


def test_a_scripted_judge_counts_every_reply_and_the_usage_is_stored(tmp_path: Path) -> None:
    the_task = task(
        {"kind": "text", "name": "says window", "contains": "refund window"},
        {"kind": "llm_judge", "name": "explains", "criterion": EXPLAINS},
        {
            "kind": "llm_judge",
            "name": "friendly",
            "criterion": FRIENDLY,
            "retries": 2,
            "hard": False,
        },
    )
    transcript = episode()
    verdict = asyncio.run(grade(transcript, CheckContext(the_task, ModelRuntime(), SCRIPTED_JUDGE)))
    assert verdict.outcome == "pass" and [c.outcome for c in verdict.soft_errors()] == ["error"]
    text, explains, friendly = verdict.checks
    assert text.usage is None, "a check that calls no model has no usage"
    assert explains.usage is not None and explains.usage.calls == 1
    assert friendly.usage is not None and friendly.usage.calls == 3, "1 + 2 unparseable retries"
    spent = verdict.judge_usage()
    judgement = '{"reasoning": "The agent states the 30-day refund window.", "passed": true}'
    unparseable = "I am not sure what to say about this conversation."
    assert spent.latency_s > 0
    assert spent.model_copy(update={"latency_s": 0.0}) == Usage(
        calls=4,
        input_tokens=words(prompt(EXPLAINS, the_task, transcript))
        + 3 * words(prompt(FRIENDLY, the_task, transcript)),
        output_tokens=len(judgement.split()) + 3 * len(unparseable.split()),
        cost_usd=0.0,  # the scripted model is free, hence not unpriced either
    )

    [row] = stored_rows(tmp_path, transcript, verdict)
    assert row.verdict == verdict
    assert row.verdict.judge_usage() == spent
    assert row.usage == Usage() and row.user_usage == Usage(), "the agent's usage stays apart"


def test_verdicts_stored_before_judge_usage_still_load() -> None:
    old = (
        '{"task_id": "t", "trial": 0, "outcome": "pass", "score": 1.0, "checks": [{"name": "j",'
        ' "kind": "llm_judge", "outcome": "pass", "score": 1.0, "reason": "ok", "hard": true,'
        ' "weight": 1.0, "diagnostic": false, "sandbox": null}]}'
    )
    verdict = Verdict.model_validate_json(old)
    assert verdict.checks[0].usage is None and verdict.judge_usage() == Usage()
    assert Verdict(task_id="t", outcome="pass").judge_usage() == Usage()
    assert CheckResult(name="c", kind="text", outcome="pass").usage is None
    assert Finding("pass", "fine").usage is None, "plug-ins written before usage keep working"


def test_a_judge_that_fails_before_replying_counts_nothing() -> None:
    transcript = episode()
    nosuch = task({"kind": "llm_judge", "criterion": EXPLAINS, "model": "nosuch/model"})
    verdict = asyncio.run(grade(transcript, CheckContext(nosuch, ModelRuntime(), None)))
    assert verdict.checks[0].outcome == "error" and verdict.checks[0].usage is None
    assert verdict.judge_usage() == Usage()
    with FakeServer(faults=Faults(rate_500=1.0)).running() as server:
        judge = ModelRef(id="openai/fake-model", base_url=f"{server.url}/v1")
        down = task({"kind": "llm_judge", "criterion": EXPLAINS, "retries": 3})
        verdict = asyncio.run(
            grade(transcript, CheckContext(down, ModelRuntime(policy=FAST), judge))
        )
    [check] = verdict.checks
    assert (check.outcome, check.error_side) == ("error", Side.JUDGE)
    assert "HTTP 500" in check.reason and check.usage is None
    assert verdict.judge_usage() == Usage()


class FlakyJudge:
    """The bundled judge rules behind the fake server, except that its first reply to each
    prompt is not JSON (so the harness must ask again); it notes each reply's token counts."""

    def __init__(self, fail_after_garbage: bool = False):
        self.rules = ScriptedModel(load_script(Path("agents/scripts/judge.yaml")).spec)
        self.fail_after_garbage = fail_after_garbage
        self.asked: Counter[str] = Counter()
        self.tokens: list[tuple[int, int]] = []  # (input, output) of every reply given

    async def __call__(self, messages: list[Message]) -> Message:
        self.asked[messages[-1].content] += 1
        if self.asked[messages[-1].content] == 1:
            reply = Message(role="assistant", content="Let me think about this one.")
        elif self.fail_after_garbage:
            raise ModelError("the judge is gone")
        else:
            reply = self.rules.reply(messages)
        self.tokens.append((words(messages), len(reply.content.split())))
        return reply

    def cost(self) -> float:
        return sum(i * PRICE_IN + o * PRICE_OUT for i, o in self.tokens) / 1e6


def prices_file(tmp_path: Path) -> Path:
    path = tmp_path / "prices.yaml"
    path.write_text(f"openai/fake-model: {{input: {PRICE_IN}, output: {PRICE_OUT}}}\n")
    return path


def judged_task() -> Task:
    return task(
        {"kind": "text", "contains": "refund window"},
        {"kind": "llm_judge", "name": "explains", "criterion": EXPLAINS},
    )


def test_a_priced_judge_is_costed_retry_included_and_cached_calls_count_as_cached(
    tmp_path: Path,
) -> None:
    responder = FlakyJudge()
    transcript = episode()
    with FakeServer(responder=responder).running() as server:
        judge = ModelRef(id="openai/fake-model", base_url=f"{server.url}/v1")

        def grade_once() -> Verdict:
            runtime = ModelRuntime(
                cache=ResponseCache(tmp_path / "cache.db"),
                prices=PriceTable(prices_file(tmp_path)),
                policy=FAST,
            )
            try:
                context = CheckContext(judged_task(), runtime, judge)
                return asyncio.run(grade(transcript, context))
            finally:
                runtime.close()

        first = grade_once()
        assert server.snapshot()["requests"] == 2, "an unparseable reply, then a judgement"
        again = grade_once()
        assert server.snapshot()["requests"] == 2, "the second grading came from the cache"
    assert first.outcome == again.outcome == "pass"
    assert len(responder.tokens) == 2
    spent = first.judge_usage()
    assert (spent.calls, spent.cached_calls, spent.unpriced) == (2, 0, [])
    assert spent.input_tokens == sum(i for i, _ in responder.tokens)
    assert spent.output_tokens == sum(o for _, o in responder.tokens)
    assert spent.cost_usd == pytest.approx(responder.cost()) and spent.cost_usd > 0
    cached = again.judge_usage()
    assert (cached.calls, cached.cached_calls) == (2, 2)
    assert cached.cost_usd == pytest.approx(spent.cost_usd), "a cached call keeps its cost"

    [row] = stored_rows(tmp_path, transcript, first)
    assert row.verdict is not None and row.verdict.judge_usage() == spent


def test_an_unpriced_judge_is_named_and_a_failure_after_a_reply_still_counts(
    tmp_path: Path,
) -> None:
    transcript = episode()
    unpriced = FlakyJudge()
    with FakeServer(responder=unpriced).running() as server:
        judge = ModelRef(id="openai/fake-model", base_url=f"{server.url}/v1")
        context = CheckContext(judged_task(), ModelRuntime(policy=FAST), judge)
        verdict = asyncio.run(grade(transcript, context))
    spent = verdict.judge_usage()
    assert verdict.outcome == "pass" and spent.calls == 2
    assert spent.cost_usd == 0 and spent.unpriced == ["openai/fake-model"]
    [row] = stored_rows(tmp_path, transcript, verdict)
    assert row.verdict is not None and row.verdict.judge_usage().unpriced == ["openai/fake-model"]

    gone = FlakyJudge(fail_after_garbage=True)
    with FakeServer(responder=gone).running() as server:
        judge = ModelRef(id="openai/fake-model", base_url=f"{server.url}/v1")
        runtime = ModelRuntime(prices=PriceTable(prices_file(tmp_path)), policy=FAST)
        check = asyncio.run(
            run_check(
                judged_task().checks[1], transcript, CheckContext(judged_task(), runtime, judge)
            )
        )
    assert (check.outcome, check.error_side) == ("error", Side.JUDGE)
    assert "the judge is gone" in check.reason
    assert check.usage is not None and check.usage.calls == 1, "the garbage reply is counted"
    assert check.usage.cost_usd == pytest.approx(gone.cost()) and gone.cost() > 0


def test_run_eval_stores_the_judges_usage_with_each_verdict(cli, tmp_path: Path) -> None:
    """The whole path: run-eval grades with a priced judge behind an OpenAI-compatible server,
    and the stored episode row gives the judge's usage beside the agent's."""
    responder = FlakyJudge()
    store = tmp_path / "results.db"
    with FakeServer(responder=responder).running() as server:
        done = cli(
            "run-eval",
            "--tasks",
            "tasks/support",
            "--ids",
            "refund-outside-window",
            "--agent",
            "agents/support-baseline.yaml",
            "--set",
            SCRIPTED,
            "--judge-model",
            f"{{id: openai/fake-model, base_url: '{server.url}/v1'}}",
            "--prices",
            prices_file(tmp_path),
            "--cache",
            tmp_path / "cache.db",
            "--store",
            store,
            "--no-traces",
        )
    assert done.exit_code in (0, 1), done.output
    with sqlite3.connect(store) as db:
        [(run_id,)] = db.execute("SELECT id FROM runs")
    results = Store(store)
    try:
        [row] = list(results.episode_rows(run_id))
    finally:
        results.close()
    assert row.verdict is not None
    [judged] = [c for c in row.verdict.checks if c.kind == "llm_judge"]
    assert judged.outcome == "fail"  # the baseline agent gives no reason rooted in the policy
    spent = row.verdict.judge_usage()
    assert (spent.calls, spent.cached_calls, spent.unpriced) == (2, 0, [])
    assert spent.cost_usd == pytest.approx(responder.cost()) and spent.cost_usd > 0
    assert row.usage.calls > 0 and row.usage.cost_usd == 0, "the scripted agent is free"


def test_the_pairwise_judge_reports_its_usage() -> None:
    judge = ScriptedModel(load_script(Path("agents/scripts/judge.yaml")).spec)
    good, bad = episode(), episode("Sorry, something went wrong.")
    the_task = task({"kind": "text", "contains": "x"})
    verdict = asyncio.run(compare_pair(the_task, good, bad, judge))
    assert verdict.winner == "a" and verdict.usage.calls == 2, "one call per order"
    domain = task_domain(the_task)
    asked = [
        pairwise_prompt(the_task.scenario.reason, first, second, domain)
        for first, second in ((good, bad), (bad, good))
    ]
    assert verdict.usage.input_tokens == sum(words(p) for p in asked)

    mumbler = ScriptedModel(Script.model_validate({"kind": "script", "rules": [{"reply": "hmm"}]}))
    failed = asyncio.run(compare_pair(the_task, good, bad, mumbler, retries=2))
    assert failed.winner is None and failed.error
    assert failed.usage.calls == 3, "the failed order's three unparseable replies"
    assert type(failed).model_validate_json(failed.model_dump_json()) == failed

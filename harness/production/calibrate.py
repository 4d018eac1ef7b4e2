"""`harness judge calibrate` as one library call: how well a judge agrees with the people who
left feedback on production sessions.

A session's human label comes from its feedback: `bad` when `failures.failure_of` reads it as
negative (a 👎 reaction, a note, a custom label such as `false` or "wrong"), else `good` when a
reaction is a 👍 or a custom payload says true or "good"; a session with no such feedback is not
labelled and is left out. The judge grades each labelled session's conversation with the given
`llm_judge` checks (it passes when every one passes); a check that ends in `error` makes the
session an `error`, left out of the agreement and reported. Agreement is the 2x2 table (judge
pass/fail x human good/bad), accuracy with its 95% Wilson interval, Cohen's kappa, and the
judge's bias: the share of the sessions it passed that people marked bad.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.grading.checks import CheckContext, run_check
from harness.models import ModelRuntime
from harness.outcomes import DEFAULT, ErrorValues
from harness.production.behaviour import sessions
from harness.production.calls import CallRecord, Filters, Unreadable
from harness.production.failures import EXPECTED, failure_of
from harness.production.reconstruct import Conversation
from harness.specs.agent import ModelRef
from harness.specs.task import Task
from harness.stats.rates import wilson_interval

POSITIVE_EMOJI = {
    "👍",
    "👍🏻",
    "👍🏼",
    "👍🏽",
    "👍🏾",
    "👍🏿",
    "thumbsup",
    "thumbs_up",
    "+1",
    ":+1:",
}
POSITIVE_LABELS = {"good", "right", "correct", "positive", "pass", "passed", "helpful", "yes"}


def human_label(conversation: Conversation) -> str | None:
    """`bad`, `good`, or None when no feedback says either (negative feedback wins)."""
    if failure_of(conversation).negative:
        return "bad"
    for row in conversation.feedback:
        kind, payload = str(row.get("feedback_type", "")), row.get("payload") or {}
        if kind.startswith("wandb.reaction"):
            if str(payload.get("emoji", "")).strip() in POSITIVE_EMOJI:
                return "good"
        elif not kind.startswith("wandb.note") and kind not in EXPECTED:  # a correction
            values = payload.values() if isinstance(payload, dict) else [payload]
            if any(
                v is True or (isinstance(v, str) and v.lower() in POSITIVE_LABELS) for v in values
            ):
                return "good"
    return None


@dataclass
class Calibration:
    """The judge against the human labels."""

    table: dict[str, int] = field(
        default_factory=lambda: {"pass_good": 0, "pass_bad": 0, "fail_good": 0, "fail_bad": 0}
    )
    errors: list[tuple[str, str]] = field(default_factory=list)  # (session, the judge's error)
    unlabelled: int = 0
    unreadable: list[Unreadable] = field(default_factory=list)

    @property
    def judged(self) -> int:
        return sum(self.table.values())

    @property
    def agreed(self) -> int:
        return self.table["pass_good"] + self.table["fail_bad"]

    @property
    def accuracy(self) -> float | None:
        return self.agreed / self.judged if self.judged else None

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.agreed, self.judged)

    @property
    def kappa(self) -> float | None:
        """Cohen's kappa; None without sessions, or when chance alone explains every label."""
        n, t = self.judged, self.table
        if not n:
            return None
        passed, good = t["pass_good"] + t["pass_bad"], t["pass_good"] + t["fail_good"]
        chance = (passed * good + (n - passed) * (n - good)) / n**2
        return None if chance == 1 else (self.agreed / n - chance) / (1 - chance)

    @property
    def bias(self) -> float | None:
        """Share of the sessions the judge passed that people marked bad."""
        passed = self.table["pass_good"] + self.table["pass_bad"]
        return self.table["pass_bad"] / passed if passed else None

    def as_json(self) -> dict[str, Any]:
        low, high = self.interval
        return {
            "table": dict(self.table),
            "judged": self.judged,
            "accuracy": self.accuracy,
            "accuracy_interval": [low, high],
            "kappa": self.kappa,
            "bias": self.bias,
            "errors": [{"session": key, "reason": why} for key, why in self.errors],
            "unlabelled": self.unlabelled,
            "unreadable": [str(p) for p in self.unreadable],
        }


async def _judge(
    conversation: Conversation,
    checks: Sequence[tuple[Task, Any]],
    runtime: ModelRuntime,
    judge_model: ModelRef | None,
) -> tuple[str, str]:
    """("pass" | "fail" | "error", the reason of the first check that did not pass)."""
    results = [
        await run_check(check, conversation.transcript, CheckContext(task, runtime, judge_model))
        for task, check in checks
    ]
    for outcome in ("error", "fail"):
        if found := next((r for r in results if r.outcome == outcome), None):
            return outcome, f"{found.name}: {found.reason}"
    return "pass", ""


async def _calibrate(
    labelled: Iterable[tuple[Conversation, str]],
    checks: Sequence[tuple[Task, Any]],
    judge_model: ModelRef | None,
    found: Calibration,
) -> None:
    runtime = ModelRuntime()
    try:
        for conversation, label in labelled:
            outcome, reason = await _judge(conversation, checks, runtime, judge_model)
            if outcome == "error":
                found.errors.append((conversation.key, reason))
            else:
                found.table[f"{outcome}_{label}"] += 1
    finally:
        await runtime.aclose()


def judge_key(model: ModelRef) -> str:
    """What names a judge in the store's calibrations and the gate's judge rule: its model id,
    with its endpoint and, for a scripted judge, its rules file's name."""
    parts = [model.id]
    if model.base_url:
        parts.append(model.base_url)
    if model.script:
        parts.append(Path(model.script).name)
    return " ".join(parts)


def calibrate(
    calls: Iterable[CallRecord],
    filters: Filters,
    checks: Sequence[tuple[Task, Any]],
    judge_model: ModelRef | None,
    error_values: ErrorValues = DEFAULT,
) -> Calibration:
    """Grade every production session with a human label by `checks` (`llm_judge` checks, each
    with the task it comes from, which gives its domain) and count the agreement; the judge of a
    check that names none is `judge_model`."""
    found = Calibration()
    labelled = []
    for conversation in sessions(calls, filters, found.unreadable, error_values):
        label = human_label(conversation)
        if label is None:
            found.unlabelled += 1
        else:
            labelled.append((conversation, label))
    if labelled:
        asyncio.run(_calibrate(labelled, checks, judge_model, found))
    return found

"""`harness judge calibrate` as one library call: how well a judge agrees with the people who
left feedback on production sessions.

A session's human label comes from its feedback: `bad` when `failures.failure_of` reads it as
negative (a 👎 reaction, a note, a custom label such as `false` or "wrong"), else `good` when a
reaction is a 👍 or a custom payload says true or "good"; a session with no such feedback is not
labelled and is left out. The judge grades each labelled session's conversation with the given
`llm_judge` checks (it passes when every one passes); a check that ends in `error` makes the
session an `error`, left out of the agreement and reported. Agreement is the 2x2 table (judge
pass/fail x human good/bad), accuracy with its 95% Wilson interval, Cohen's kappa with its 95%
interval, and the judge's bias: its pass rate minus the share of sessions people marked good
(signed: negative, the judge is stricter than people), with the precision and the recall of its
passes beside it.

Kappa's interval is the equal-tailed 95% interval of kappa under the Jeffreys posterior of the
four cells' probabilities (Dirichlet(counts + 1/2)), by `POSTERIOR_DRAWS` seeded draws so that it
is the same every time for the same table, widened to hold the point estimate (the posterior's
pull to the middle can leave out a kappa of 1). It covers the judge's kappa on the population of
sessions the labelled ones were drawn from (each session independent). It exists for every
table, also one where kappa's point estimate does not (every label alike): then it is wide, as
it should be. Its coverage was measured by simulation (`bench/judge_calibration.py`, 1,000
samples per cell) at 10 to 100 sessions, people's "good" rates of 50% to 90%, judges as strict as
people or 10 points stricter, true kappas from 0 to 0.95: median 94.7%, 88% of cells at 93% or
more, lowest 82% (10 sessions, true kappa 0.95: one disagreement in 10 puts the upper end just
under 0.95). The lower end, the one the gate reads, was above the true kappa in at most 4.8% of
samples (true kappa 0, 90% good, 20 sessions), about 2.5% elsewhere. Why not a bootstrap over
sessions: every resample of sessions on which judge and people all agreed agrees too, so it
says kappa 1 with no doubt, which is the failure the gate must not have.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness.grading.checks import CheckContext, run_check
from harness.models import ModelRuntime
from harness.outcomes import DEFAULT, ErrorValues
from harness.production.behaviour import sessions
from harness.production.calls import CallRecord, Filters, Unreadable
from harness.production.failures import EXPECTED, POSITIVE_EMOJI, POSITIVE_LABELS, failure_of
from harness.production.reconstruct import Conversation
from harness.specs.agent import ModelRef
from harness.specs.task import Task
from harness.stats.rates import wilson_interval

POSTERIOR_DRAWS = 20_000
POSTERIOR_SEED = 0
CONFIDENCE = 0.95
CELLS = ("pass_good", "pass_bad", "fail_good", "fail_bad")


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


def kappa_of(cells: np.ndarray) -> np.ndarray:
    """Cohen's kappa of tables of cell probabilities or counts (..., 4) laid out as `CELLS`; nan
    where chance alone explains every label."""
    total = cells.sum(axis=-1)
    pass_good, pass_bad, fail_good, fail_bad = (cells[..., i] / total for i in range(4))
    passed, good = pass_good + pass_bad, pass_good + fail_good
    chance = passed * good + (1 - passed) * (1 - good)
    observed = pass_good + fail_bad
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(chance < 1, (observed - chance) / (1 - chance), np.nan)


@dataclass
class Calibration:
    """The judge against the human labels."""

    table: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CELLS, 0))
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
    def passed(self) -> int:
        """Sessions the judge passed."""
        return self.table["pass_good"] + self.table["pass_bad"]

    @property
    def good(self) -> int:
        """Sessions people marked good."""
        return self.table["pass_good"] + self.table["fail_good"]

    @property
    def accuracy(self) -> float | None:
        return self.agreed / self.judged if self.judged else None

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.agreed, self.judged)

    @property
    def kappa(self) -> float | None:
        """Cohen's kappa; None without sessions, or when chance alone explains every label."""
        if not self.judged:
            return None
        value = float(kappa_of(np.array([self.table[c] for c in CELLS], dtype=float)))
        return None if np.isnan(value) else value

    def _posterior(self) -> np.ndarray:
        """Seeded draws of the four cells' probabilities from their Jeffreys posterior."""
        counts = np.array([self.table[c] for c in CELLS], dtype=float)
        rng = np.random.default_rng(POSTERIOR_SEED)
        return rng.dirichlet(counts + 0.5, size=POSTERIOR_DRAWS)

    @property
    def kappa_interval(self) -> tuple[float, float] | None:
        """Kappa's 95% interval (see the module's doc for what it covers); None without
        sessions."""
        if not self.judged:
            return None
        tail = (1 - CONFIDENCE) / 2 * 100
        low, high = np.nanpercentile(kappa_of(self._posterior()), [tail, 100 - tail])
        if (kappa := self.kappa) is not None:  # the posterior's pull to the middle can leave
            low, high = min(low, kappa), max(high, kappa)  # out a kappa of 1: widen to it
        return float(low), float(high)

    @property
    def pass_rate(self) -> float | None:
        """Share of the sessions the judge passed."""
        return self.passed / self.judged if self.judged else None

    @property
    def good_rate(self) -> float | None:
        """Share of the sessions people marked good."""
        return self.good / self.judged if self.judged else None

    @property
    def bias(self) -> float | None:
        """The judge's pass rate minus people's good rate: negative when the judge is stricter
        than people, positive when it is more lenient (a judge can agree on most sessions and
        still be biased: this is the direction of its disagreements)."""
        if not self.judged:
            return None
        return (self.table["pass_bad"] - self.table["fail_good"]) / self.judged

    @property
    def bias_interval(self) -> tuple[float, float] | None:
        """The bias's 95% interval from the same posterior as kappa's: it covers the pass rate
        minus the good rate of the population of sessions; None without sessions."""
        if not self.judged:
            return None
        draws = self._posterior()
        tail = (1 - CONFIDENCE) / 2 * 100
        low, high = np.percentile(draws[:, 1] - draws[:, 2], [tail, 100 - tail])
        return float(low), float(high)

    @property
    def precision(self) -> float | None:
        """Share of the judge's passes that people marked good (None: it passed none)."""
        return self.table["pass_good"] / self.passed if self.passed else None

    @property
    def recall(self) -> float | None:
        """Share of the sessions people marked good that the judge passed (None: none good)."""
        return self.table["pass_good"] / self.good if self.good else None

    def as_json(self) -> dict[str, Any]:
        low, high = self.interval
        kappa_interval, bias_interval = self.kappa_interval, self.bias_interval
        return {
            "table": dict(self.table),
            "judged": self.judged,
            "accuracy": self.accuracy,
            "accuracy_interval": [low, high],
            "kappa": self.kappa,
            "kappa_interval": list(kappa_interval) if kappa_interval else None,
            "pass_rate": self.pass_rate,
            "good_rate": self.good_rate,
            "bias": self.bias,
            "bias_interval": list(bias_interval) if bias_interval else None,
            "precision": self.precision,
            "recall": self.recall,
            "intervals": f"{CONFIDENCE:.0%} equal-tailed, Jeffreys posterior of the table "
            f"({POSTERIOR_DRAWS} seeded draws); accuracy: Wilson",
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
    from harness.production.to_tasks import redacted_calls

    found = Calibration()
    labelled = []
    calls = redacted_calls(calls)  # the judge reads production's sessions: none of its keys
    for conversation in sessions(calls, filters, found.unreadable, error_values):
        label = human_label(conversation)
        if label is None:
            found.unlabelled += 1
        else:
            labelled.append((conversation, label))
    if labelled:
        asyncio.run(_calibrate(labelled, checks, judge_model, found))
    return found

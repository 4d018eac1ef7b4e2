"""A run's figures, computed once from the store and shared by every report format."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from harness.defaults import MAX_ERROR_RATE
from harness.stats import RunRate, run_rate, suite_pass_hat_k
from harness.store import EpisodeRow, Store
from harness.transcript import EndReason, Usage


@dataclass
class TaskLine:
    """One task of a run over its trials."""

    task_id: str
    level: int | None
    passed: int = 0
    failed: int = 0
    errors: int = 0
    turns: list[int] = field(default_factory=list)
    end_reasons: Counter[str] = field(default_factory=Counter)
    failed_checks: dict[str, None] = field(default_factory=dict)  # ordered set
    # what went wrong beyond failed checks: crashes, errors, soft checks that could not decide
    error_reasons: dict[str, None] = field(default_factory=dict)

    @property
    def trials(self) -> int:
        return self.passed + self.failed + self.errors

    @property
    def outcome(self) -> str:
        """pass/fail/error for one trial; 'k/n pass' for several."""
        if self.trials == 1:
            return "pass" if self.passed else ("fail" if self.failed else "error")
        return f"{self.passed}/{self.trials} pass"


@dataclass
class RunFigures:
    """Everything a summary of one run prints."""

    run_id: str
    variant: str
    variant_hash: str
    tasks: list[TaskLine]
    usage: Usage
    user_usage: Usage
    judge_usage: Usage
    passed: int
    graded: int
    pass_rate: RunRate  # the one rate of the run and its interval clustered by task
    errors_by_side: Counter[str]
    trials: int
    pass_hat_k: list[tuple[int, float]]
    # passes whose verdict stands while a soft check could not decide, by the side that failed
    soft_errors_by_side: Counter[str] = field(default_factory=Counter)

    @property
    def rate(self) -> float:
        """The mean of the per-task pass rates (`harness.stats.run_rate`)."""
        return self.pass_rate.estimate

    @property
    def low(self) -> float:
        return self.pass_rate.low

    @property
    def high(self) -> float:
        return self.pass_rate.high

    @property
    def interval_text(self) -> str:
        """What the interval covers, as every printer says it."""
        return interval_text(self.pass_rate)

    @property
    def episodes(self) -> int:
        """Episodes stored, graded or not."""
        return sum(len(line.turns) for line in self.tasks)

    @property
    def errors(self) -> int:
        """Episodes graded error: evidence of neither pass nor fail."""
        return sum(self.errors_by_side.values())

    @property
    def too_many_errors(self) -> bool:
        """Whether more of the run's episodes errored than a gate accepts (its default
        `max_error_rate`, `harness.defaults.MAX_ERROR_RATE`): beyond it no gate or comparison
        decides on the run, so its pass rate is no result and a summary says so first."""
        return self.errors > 0 and self.errors > MAX_ERROR_RATE * self.episodes

    @property
    def counts_text(self) -> str:
        """'3/9 episodes', or with errors '3/3 graded of 9 episodes': a rate never reads as if
        the errored episodes did not exist."""
        if not self.errors:
            return f"{self.passed}/{self.graded} episodes"
        return f"{self.passed}/{self.graded} graded of {self.episodes} episodes"

    @property
    def cost_usd(self) -> float:
        """Agent, simulated user and judges together, in US dollars."""
        return self.usage.cost_usd + self.user_usage.cost_usd + self.judge_usage.cost_usd

    def errored_line(self) -> str:
        """'6 of 9 episodes errored (judge 6): ...': what a summary prints before any rate when
        more episodes errored than a gate accepts."""
        by_side = ", ".join(f"{side} {n}" for side, n in sorted(self.errors_by_side.items()))
        return (
            f"{self.errors} of {self.episodes} episodes errored ({by_side}): more than the "
            f"{MAX_ERROR_RATE:.0%} a gate accepts, so the pass rate below, over {self.graded} "
            "graded, is no result"
        )


def interval_text(rate: RunRate) -> str:
    """'95% CI 56.6%-89.9%, clustered by 22 tasks': the interval and its unit, in one phrase."""
    return f"95% CI {rate.low:.1%}-{rate.high:.1%}, clustered by {rate.tasks} tasks"


def run_figures(store: Store, run_id: str, levels: dict[str, int] | None = None) -> RunFigures:
    """Read a run's episodes and newest verdicts and compute its summary."""
    info = store.run(run_id)
    if info is None:
        raise LookupError(f"no run {run_id!r} in {store.path}")
    lines: dict[str, TaskLine] = {}
    usage, user_usage, judge_usage = Usage(), Usage(), Usage()
    sides: Counter[str] = Counter()
    soft: Counter[str] = Counter()
    outcomes: dict[str, list[bool]] = defaultdict(list)
    for row in store.episode_rows(run_id):
        line = lines.setdefault(row.task_id, TaskLine(row.task_id, (levels or {}).get(row.task_id)))
        _add(line, row, sides, outcomes)
        undecided = (
            row.verdict.soft_errors() if row.verdict and row.verdict.outcome == "pass" else []
        )
        if undecided:
            side = undecided[0].error_side
            soft[side.value if side else "unknown"] += 1
            why = shorten(undecided[0].reason, 60)
            line.error_reasons[f"[soft, {undecided[0].name}] {why}"] = None
        usage.add(row.usage)
        user_usage.add(row.user_usage)
        judge_usage.add(row.judge_usage)
    passed = sum(line.passed for line in lines.values())
    graded = passed + sum(line.failed for line in lines.values())
    trials = min((len(v) for v in outcomes.values()), default=0)
    pass_hat: list[tuple[int, float]] = []
    if trials > 1:
        pass_hat = [(k, suite_pass_hat_k(outcomes, k)) for k in range(1, trials + 1)]
    return RunFigures(
        run_id,
        info.variant,
        info.variant_hash,
        list(lines.values()),
        usage,
        user_usage,
        judge_usage,
        passed,
        graded,
        run_rate(outcomes),
        sides,
        trials,
        pass_hat,
        soft,
    )


def _add(
    line: TaskLine, row: EpisodeRow, sides: Counter[str], outcomes: dict[str, list[bool]]
) -> None:
    line.turns.append(row.turns)
    line.end_reasons[row.end_reason] += 1
    verdict = row.verdict
    if verdict is None:
        return
    if verdict.outcome == "error":
        line.errors += 1
        side = verdict.error_side.value if verdict.error_side else "unknown"
        sides[side] += 1
        line.error_reasons[f"[{side}] {shorten(verdict.reason, CRASH_CHARS)}"] = None
        return
    outcomes[row.task_id].append(verdict.outcome == "pass")
    if verdict.outcome == "pass":
        line.passed += 1
    else:
        line.failed += 1
        if row.end_reason == EndReason.AGENT_CRASH.value:
            # the verdict's reason carries the transcript's error (the exception's type and
            # message), which `episode_rows` reads without loading the transcript
            line.error_reasons[shorten(verdict.reason, CRASH_CHARS)] = None
        line.failed_checks.update(dict.fromkeys(c.name for c in verdict.failed_checks()))


CRASH_CHARS = 160
"""How much of a crash's exception, or an error's reason, a summary shows: its type (its side)
and the start of its message."""


def shorten(text: str, limit: int) -> str:
    """`text` on one line (a multi-line message's lines joined), cut to `limit` characters with
    an ellipsis at a word boundary (no word is cut in half, unless it alone is too long): a
    table cell stays readable and the exception's type, first, is kept."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    if flat[limit - 1] != " " and " " in cut:
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip(" ,;:") + "…"

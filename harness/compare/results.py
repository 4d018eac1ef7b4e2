"""The results of a comparison: pass rates with their task-clustered intervals, the paired
difference, the tests, spend and the verdict (pydantic models, as the API and reports show them)."""

from __future__ import annotations

import html
from typing import Literal

from pydantic import BaseModel, Field

from harness import defaults
from harness.transcript import Usage

Verdict = Literal["better", "worse", "no detectable difference", "undecided: errors"]


class PassRate(BaseModel):
    """A pass rate over graded episodes, with its interval counting tasks, not trials."""

    rate: float = Field(
        description="Mean of the per-task pass rates (the share of the episodes that passed "
        "when every task has the same number of trials)."
    )
    passed: int = Field(description="Episodes that passed.")
    n: int = Field(description="Episodes counted.")
    tasks: int = Field(default=0, description="Tasks counted: the unit of the interval.")
    low: float = Field(
        description="Lower end of the 95% interval of the rate, clustered by task "
        "(`harness.stats.run_rate`)."
    )
    high: float = Field(description="Upper end of the same interval.")


class RunPassRate(PassRate):
    """One compared run's pass rate over the pairs both runs graded."""

    run_id: str = Field(description="The run in the results store.")
    variant: str = Field(description="Agent variant name.")


class TaskDifference(BaseModel):
    """B's pass rate minus A's with the task as the unit: what every decision rests on."""

    tasks: int = Field(description="Tasks compared (each with its paired trials).")
    difference: float = Field(description="Mean over tasks of B's task rate minus A's.")
    se: float = Field(
        description="Cluster-robust standard error: sd of the task differences "
        "over the square root of the number of tasks."
    )
    low: float = Field(
        description="Lower end of the 95% interval of the population's mean difference, the "
        "task as the unit (`harness.stats.difference_interval`)."
    )
    high: float = Field(description="Upper end of the same interval.")
    interval: str = Field(
        default="",
        description="How the interval was made: the score interval at the task-clustered "
        "effective size, or widened to the share of tasks a sample of this size can miss.",
    )
    p_value: float = Field(description="Two-sided sign-flip permutation p-value over tasks.")
    p_worse: float = Field(description="One-sided sign-flip p-value that B is worse.")
    p_better: float = Field(description="One-sided sign-flip p-value that B is better.")
    exact: bool = Field(description="Every sign pattern counted (else 20,000 random ones).")
    better_tasks: int = Field(description="Tasks whose pass rate is higher in B.")
    worse_tasks: int = Field(description="Tasks whose pass rate is lower in B.")
    mde: float = Field(
        description="Minimum detectable effect at this size: the difference a two-sided test "
        "at alpha finds with 80% power (`harness.stats.minimum_detectable_effect`)."
    )


class PassRates(BaseModel):
    """Both variants' pass rates over one group of pairs (a level or a tag), and their
    task-clustered difference."""

    a: PassRate = Field(description="Variant A.")
    b: PassRate = Field(description="Variant B.")
    difference: TaskDifference | None = Field(
        default=None, description="B - A over the group's tasks."
    )


class PairedTest(BaseModel):
    """The exact McNemar test on the (task, trial) pairs where only one side passed. It assumes
    independent trials, which trials of one task are not: shown for reference, it decides
    nothing."""

    b_only: int = Field(description="Pairs only B passed.")
    a_only: int = Field(description="Pairs only A passed.")
    p_value: float = Field(description="Two-sided p-value, assuming independent trials.")
    p_b_worse: float = Field(description="One-sided p-value that B is worse, same assumption.")


class PassHatK(BaseModel):
    """pass^k of both variants at one k."""

    k: int = Field(description="Trials that must all pass.")
    a: float = Field(description="Variant A's pass^k.")
    b: float = Field(description="Variant B's pass^k.")


class Spend(BaseModel):
    """Mean cost, time and turns per episode."""

    cost_usd: float = Field(
        description="US dollars per episode: agent, simulated user and judges together."
    )
    agent_cost_usd: float = Field(default=0.0, description="The agent's US dollars per episode.")
    user_cost_usd: float = Field(
        default=0.0, description="The simulated user's US dollars per episode."
    )
    judge_cost_usd: float = Field(default=0.0, description="The judges' US dollars per episode.")
    latency_s: float = Field(description="Seconds per episode.")
    turns: float = Field(description="Turns per episode.")


class Spends(BaseModel):
    """Both variants' spend per episode."""

    a: Spend = Field(description="Variant A.")
    b: Spend = Field(description="Variant B.")


class RelativeJudgement(BaseModel):
    """The pairwise judge's verdicts over every (task, trial) both runs played."""

    b_wins: int = Field(description="Pairs the judge gave to B.")
    a_wins: int = Field(description="Pairs the judge gave to A.")
    ties: int = Field(description="Pairs judged even.")
    judge_errors: int = Field(description="Pairs the judge failed to decide.")
    win_rate: float = Field(
        description="B's win rate, a tie counting half: the mean of per-task win rates."
    )
    low: float = Field(
        description="Lower end of the 95% interval of the win rate, clustered by task."
    )
    high: float = Field(description="Upper end of the same interval.")
    tasks: int = Field(default=0, description="Tasks with at least one decided pair.")
    usage: Usage = Field(default_factory=Usage, description="The judge's calls, both orders.")

    @property
    def judged(self) -> int:
        """Pairs the judge decided (won by either side, or even)."""
        return self.b_wins + self.a_wins + self.ties

    def line(self) -> str:
        """'relative judge: B wins 62.5% (CI ...)', or 'relative judge: no judgements (...)' when
        the judge decided no pair: a win rate of nothing judged is no figure (it would read 50%)."""
        counts = (
            f"{self.b_wins} wins, {self.a_wins} losses, {self.ties} ties, "
            f"{self.judge_errors} judge errors"
        )
        if not self.judged:
            return f"relative judge: no judgements ({self.judge_errors} judge errors)"
        return (
            f"relative judge: B wins {self.win_rate:.1%} (95% CI {self.low:.1%}-{self.high:.1%}, "
            f"clustered by {self.tasks} tasks; {counts})"
        )


class SideErrors(BaseModel):
    """One side's episodes without evidence among the (task, trial) pairs both runs played."""

    episodes: int = Field(description="Pairs both runs played.")
    missing: int = Field(
        description="This side's episodes among them with an error verdict or none."
    )
    rate: float = Field(description="missing / episodes.")


class ErrorBounds(BaseModel):
    """The comparison redone with every episode without evidence counted as a pass and as a
    fail for the side that erred: the decision must hold at both ends."""

    a_favoured: TaskDifference = Field(
        description="B - A with A's errors counted as passes and B's as fails."
    )
    b_favoured: TaskDifference = Field(
        description="B - A with B's errors counted as passes and A's as fails."
    )


class ComparisonResult(BaseModel):
    """Variant B against variant A over the (task, trial) pairs both graded without error."""

    a: RunPassRate = Field(description="Variant A (the baseline side).")
    b: RunPassRate = Field(description="Variant B (the candidate side).")
    pairs: int = Field(description="Pairs compared.")
    excluded_errors: int = Field(description="Pairs left out because either side errored.")
    tasks: TaskDifference = Field(description="B - A with the task as the unit.")
    alpha: float = Field(default=0.05, description="Significance level of the verdict.")
    verdict: Verdict = Field(
        description="better or worse when the two-sided task-level test is at most alpha over "
        "the pairs both graded and also with every error counted either way; 'undecided: "
        "errors' when the errors could change it or either side is over the error ceiling."
    )
    verdict_reason: str = Field(default="", description="Why the verdict is undecided, if so.")
    max_error_rate: float = Field(
        default=defaults.MAX_ERROR_RATE,
        description="The error ceiling: a side with more missing evidence gets no verdict.",
    )
    errors_a: SideErrors | None = Field(default=None, description="A's missing evidence.")
    errors_b: SideErrors | None = Field(default=None, description="B's missing evidence.")
    bounds: ErrorBounds | None = Field(
        default=None, description="The difference with errors counted either way, if any."
    )
    mcnemar: PairedTest = Field(description="Exact McNemar test, assuming independent trials.")
    pass_hat_k: list[PassHatK] = Field(
        description="pass^k of both variants at k = 1, 2, 4, 8 and the number of trials."
    )
    breakdowns: dict[str, dict[str, PassRates]] = Field(
        description="Pass rates and their task-clustered difference by level and by tag: "
        "'level' or 'tag' -> group -> rates."
    )
    deltas: Spend = Field(description="B - A of the spend per episode.")
    spend: Spends = Field(description="Spend per episode of both variants.")
    flipped_to_fail: list[str] = Field(description="Tasks A mostly passed and B mostly fails.")
    flipped_to_pass: list[str] = Field(description="Tasks A mostly failed and B mostly passes.")
    notes: list[str] = Field(
        default_factory=list,
        description="What the comparison covers when it is not both runs whole (runs of "
        "different suites compared on the tasks they share), printed first.",
    )
    relative: RelativeJudgement | None = Field(
        default=None, description="The relative judge's win rate, when it was asked."
    )

    def _repr_html_(self) -> str:
        """The comparison in a notebook: both rates, the paired difference, the verdict."""
        side = "{:.1%} [{:.1%}, {:.1%}]".format
        d = self.tasks
        rows = [
            f"A {side(self.a.rate, self.a.low, self.a.high)}, "
            f"B {side(self.b.rate, self.b.low, self.b.high)} ({self.pairs} pairs)",
            f"B - A {d.difference:+.1%} [{d.low:+.1%}, {d.high:+.1%}] over {d.tasks} tasks, "
            f"p = {d.p_value:.3g}",
            f"verdict: {self.verdict}"
            + (f" ({self.verdict_reason})" if self.verdict_reason else ""),
            "flipped to pass: " + (", ".join(self.flipped_to_pass) or "none"),
            "flipped to fail: " + (", ".join(self.flipped_to_fail) or "none"),
        ]
        return "<br>".join(html.escape(row) for row in rows)

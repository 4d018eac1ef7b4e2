"""Acceptance is the gate, not GEPA's own score: production and the best candidate play the
held-out validation tasks with fresh seeds, the gate plays the evidence it needs (more trials of
a regression task that declined), and the candidate ships only if the gate passes (no rule
failed or left undecided) and the task-clustered paired test finds it better at the gate's
alpha, also with every error counted against the candidate."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.climb.search import SearchResult
from harness.climb.split import nothing_to_learn
from harness.gate import load_gate_config
from harness.gate.play import gate_async
from harness.stats import at_most


@dataclass
class Acceptance:
    """The decision, every reason for it, and the runs it rests on."""

    accepted: bool
    reasons: list[str]
    evidence: list[str] = field(default_factory=list)
    production_run: str | None = None
    candidate_run: str | None = None
    figures: dict[str, float] = field(default_factory=dict)  # pass rates, the paired test


def accept(result: SearchResult) -> Acceptance:
    """The decision on the search's best candidate. The evidence labels every figure: the
    gate decides on pass rates (the share of passing episodes, per task, averaged over
    tasks), not on the mean score GEPA compares (a fail counting its weighted check score)."""
    if result.nothing_to_learn:
        trials = result.context.config.trials
        return Acceptance(False, [nothing_to_learn(len(result.split.train), trials)])
    if not result.best:
        return Acceptance(False, ["no candidate beat production on the train tasks"])
    if not result.split.validation:
        return Acceptance(False, ["no held-out validation tasks to accept a candidate on"])
    config = result.context.config
    fresh = config.trials  # search played trials 0..trials-1: acceptance plays new seeds
    play = result.adapter.play
    production, played = play({}, result.split.validation, fresh, purpose="acceptance")
    candidate, more = play(result.best, result.split.validation, fresh, purpose="acceptance")
    if production.run_id is None or candidate.run_id is None:
        why = next((episode.error for episode in played + more if episode.error), "")
        return Acceptance(False, [f"the validation runs did not complete: {why}"])
    gate_config = load_gate_config(config.gate)
    cases = result.context.cases(result.split.validation)
    session = result.session
    gate = session.run(
        gate_async(session.engine, gate_config, candidate.run_id, production.run_id, cases)
    )
    comparison = gate.comparison  # production (A) against the candidate (B) on these tasks
    assert comparison is not None  # the gate had a baseline
    test = comparison.tasks
    evidence = [
        f"Validation: {len(result.split.validation)} held-out tasks x {config.trials} trial(s), "
        f"fresh seeds; pass rate (as the gate measured it): production {comparison.a.rate:.1%} "
        f"-> candidate {comparison.b.rate:.1%}.",
        f"Task-clustered difference in pass rate {test.difference:+.1%} (95% CI "
        f"{test.low:+.1%} to {test.high:+.1%}), one-sided p = {test.p_better:.4f} "
        f"(alpha {gate_config.alpha:g}).",
    ]
    reasons = [f"gate: {line}" for line in (*gate.reasons, *gate.undecided)]
    # better must hold with production's errors counted as passes and the candidate's as fails
    worst = comparison.bounds.a_favoured if comparison.bounds else test
    if not at_most(max(test.p_better, worst.p_better), gate_config.alpha):
        reasons.append(
            f"not better: one-sided task-clustered p = {test.p_better:.4f}"
            + (f" ({worst.p_better:.4f} with errors against it)" if comparison.bounds else "")
            + f" is not at most alpha {gate_config.alpha:g}"
        )
    accepted = not reasons
    if accepted:
        reasons = ["the gate passes and the candidate is better on the held-out tasks"]
    figures = {
        "production_pass_rate": comparison.a.rate,
        "candidate_pass_rate": comparison.b.rate,
        "pass_rate_difference": test.difference,
        "pass_rate_difference_low": test.low,
        "pass_rate_difference_high": test.high,
        "p_better": test.p_better,
        "alpha": gate_config.alpha,
    }
    return Acceptance(accepted, reasons, evidence, production.run_id, candidate.run_id, figures)

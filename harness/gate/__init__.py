"""The regression gate: may a candidate run replace the baseline? It decides only on evidence,
with the task as the unit of its test; every rule is reported with its figures, failed or not.
Where a rule cannot decide, the gate first plays the evidence it needs (`harness.gate.evidence`,
driven by `harness.api.gate`); what is still undecided makes the gate UNDECIDED, never PASS."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from harness.compare import ComparisonResult, GradedEpisodes, compare_episodes
from harness.gate.evidence import Gathered
from harness.gate.family import family, readings
from harness.gate.figures import (
    BudgetFigures,
    EvidenceRound,
    LevelFigures,
    RuleCheck,
    RunErrors,
    SuiteFigures,
)
from harness.gate.history import Drift, GateTrend, GateWeek, gate_trend
from harness.gate.judges import judge_rule
from harness.gate.rules import (
    budget_rules,
    error_rule,
    floor_figures,
    run_errors,
    statistical_rules,
    task_count_rule,
)
from harness.gate.suites import check_suites, compare_suites, run_suite
from harness.specs.gate import Gate
from harness.specs.load import load_spec
from harness.specs.located import Location, SpecError
from harness.stats import run_rate
from harness.store import PlayedTask, Store

__all__ = [
    "BudgetFigures",
    "Compared",
    "Drift",
    "EvidenceRound",
    "GateResult",
    "GateTrend",
    "GateWeek",
    "LevelFigures",
    "RuleCheck",
    "RunErrors",
    "SuiteFigures",
    "decide",
    "evaluate_gate",
    "gate_trend",
    "load_compared",
    "load_gate_config",
    "readings",
    "record_decision",
    "unequal_trials",
]


GateStatus = Literal["pass", "fail", "undecided"]


class GateResult(BaseModel):
    """The gate's decision, each failed or undecided rule as one line, every rule checked, the
    evidence it played, and the figures."""

    status: GateStatus = Field(
        default="pass",
        description="pass: every rule passed; fail: a rule failed; undecided: no rule failed "
        "but one could not decide, even after the evidence the gate could play (never a pass).",
    )
    passed: bool = Field(description="True only when the gate passed: every rule passed.")
    on_undecided: Literal["fail", "warn"] = Field(
        default="fail",
        description="The gate file's `on_undecided`: whether an UNDECIDED gate blocks (exit 1, "
        "a failed JUnit case) or only warns.",
    )
    reasons: list[str] = Field(description="Every rule that failed, one line each.")
    undecided: list[str] = Field(
        default_factory=list, description="Every rule that could not decide, one line each."
    )
    rules: list[RuleCheck] = Field(
        default_factory=list, description="Every rule checked, passed or failed, in order."
    )
    candidate_run: str = Field(description="The run the gate judged.")
    candidate_variant: str = Field(description="The candidate's agent variant name.")
    baseline_run: str | None = Field(description="The run it was compared with, if any.")
    notes: list[str] = Field(
        default_factory=list, description="Which runs were compared and how they were chosen."
    )
    evidence: list[EvidenceRound] = Field(
        default_factory=list,
        description="The rounds of episodes the gate played before deciding (more trials of "
        "declined regression tasks, replays of episodes without evidence, top-ups).",
    )
    unplayed: str | None = Field(
        default=None,
        description="Evidence the gate wanted but could not play, and why (no agent to play).",
    )
    suite: SuiteFigures | None = Field(
        default=None, description="How the two runs' suites compare, when there is a baseline."
    )
    errors: list[RunErrors] = Field(
        default_factory=list, description="Episodes without complete evidence, per run."
    )
    tasks: int = Field(default=0, description="Tasks graded (on both sides with a baseline).")
    levels: dict[int, LevelFigures] = Field(
        default_factory=dict, description="Graded pass rate per level that has a floor."
    )
    tag_floors: dict[str, LevelFigures] = Field(
        default_factory=dict, description="Graded pass rate per tag that has a floor."
    )
    comparison: ComparisonResult | None = Field(
        default=None, description="The candidate against the baseline, when there is one."
    )
    budgets: BudgetFigures = Field(description="The candidate's cost and latency.")
    failing_tasks: dict[str, list[str]] = Field(
        default_factory=dict, description="Regressed tasks and why each fails the gate."
    )

    @property
    def blocks(self) -> bool:
        """Whether the decision stops the candidate: a failed gate, or an undecided one unless
        the gate file says `on_undecided: warn`. The exit code is 1 exactly then."""
        return self.status == "fail" or (self.status == "undecided" and self.on_undecided == "fail")

    @property
    def headline(self) -> str:
        """PASS, FAIL or UNDECIDED, as every report's first line says it."""
        return {"pass": "PASS", "fail": "FAIL", "undecided": "UNDECIDED"}[self.status]

    def add_rule(self, rule: RuleCheck) -> None:
        """Add a rule decided after the others (the judge rule), updating the decision."""
        self.rules.append(rule)
        if rule.status == "fail":
            self.reasons.append(rule.detail)
        elif rule.status == "undecided":
            self.undecided.append(rule.detail)
        self.status = _status(self.rules)
        self.passed = self.status == "pass"

    def _repr_html_(self) -> str:
        """The decision in a notebook: every rule with its figures and verdict, the evidence
        played, the failing tasks (`harness.gate.html`)."""
        from harness.gate.html import gate_html

        return gate_html(self)


def _status(rules: Sequence[RuleCheck]) -> GateStatus:
    if any(rule.status == "fail" for rule in rules):
        return "fail"
    return "undecided" if any(rule.status == "undecided" for rule in rules) else "pass"


def load_gate_config(path: str | Path) -> Gate:
    """The gate's thresholds file, validated."""
    spec = load_spec(Path(path)).spec
    assert isinstance(spec, Gate)
    return spec


def unequal_trials(candidate: GradedEpisodes, baseline: GradedEpisodes) -> list[str]:
    """The tasks whose trial numbers differ between the sides, each as one phrase: the gate
    compares the same trials on both sides, and drops none."""
    mine, theirs = candidate.trials(), baseline.trials()
    return [
        f"{task} (candidate {len(mine[task])}, baseline {len(theirs[task])} trials)"
        for task in sorted(mine.keys() & theirs.keys())
        if mine[task] != theirs[task]
    ]


def evaluate_gate(
    config: Gate,
    candidate: GradedEpisodes,
    baseline: GradedEpisodes | None,
    cases: Sequence[PlayedTask],
    figures: bool = True,
) -> GateResult:
    """Apply every rule of the gate to the evidence as it is (the evidence the gate plays first
    is `harness.gate.evidence`'s). Without a baseline the comparison rules cannot apply: only
    the error, task-count, floor and budget rules do (and the report says so). The statistical
    rules are one family: a candidate identical to the baseline fails any of them with
    probability at most `config.alpha` (`harness.gate.family`; `bench/gate_power.py`). Both
    sides must hold the same trials of every task they share (a ValueError names the others).
    `figures=False` leaves out the A/B comparison the reports show (`comparison` is None): the
    decision is the same, for simulations of it (`bench/gate_power.py`)."""
    if baseline is not None and (unequal := unequal_trials(candidate, baseline)):
        raise ValueError(f"the sides hold different trials: {', '.join(unequal)}")
    sides = [(candidate, "candidate"), *([(baseline, "baseline")] if baseline else [])]
    errors = [run_errors(side, role) for side, role in sides]  # type: ignore[arg-type]
    rules = [error_rule(config, figures) for figures in errors]
    graded_candidate = candidate.graded_outcomes()
    if baseline is not None:
        tasks = len(candidate.trials().keys() & baseline.trials().keys())
    else:
        tasks = sum(1 for trials in graded_candidate.values() if trials)
    rules.append(task_count_rule(config, tasks, baseline is not None))
    comparison = None
    if baseline is not None and figures:
        comparison = compare_episodes(
            baseline, candidate, cases, config.alpha, config.max_error_rate
        )
    favoured, other = readings(candidate, baseline)
    floors = floor_figures(config, graded_candidate, cases)
    tested, failing = statistical_rules(
        config,
        family(config, favoured, cases),
        family(config, other, cases) if other is not None else None,
        floors,
        cases,
        comparison,
        baseline is not None,
    )
    rules += tested
    budgets, spend = budget_rules(config, candidate)
    rules += spend
    status = _status(rules)
    return GateResult(
        status=status,
        passed=status == "pass",
        on_undecided=config.on_undecided,
        reasons=[rule.detail for rule in rules if rule.status == "fail"],
        undecided=[rule.detail for rule in rules if rule.status == "undecided"],
        rules=rules,
        candidate_run=candidate.run_id,
        candidate_variant=candidate.variant,
        baseline_run=baseline.run_id if baseline else None,
        errors=errors,
        tasks=tasks,
        levels={int(k.split()[1]): v for k, v in floors.items() if k.startswith("level ")},
        tag_floors={k.split(" ", 1)[1]: v for k, v in floors.items() if k.startswith("tag ")},
        comparison=comparison,
        budgets=budgets,
        failing_tasks=failing,
    )


@dataclass
class Compared:
    """What a gate compares, as the store holds it: each side's graded episodes on the tasks
    both suites hold in the same content, those tasks, how the suites compare, and notes."""

    candidate: GradedEpisodes
    baseline: GradedEpisodes | None
    cases: list[PlayedTask]
    suite: SuiteFigures | None = None
    notes: list[str] = field(default_factory=list)


def load_compared(
    store: Store,
    candidate_run: str,
    baseline_run: str | None,
    cases: Sequence[PlayedTask],
    allow_suite_change: bool = False,
    notes: Sequence[str] = (),
) -> Compared:
    """The two stored runs a gate compares. Runs of different suites (task ids and content
    hashes) are refused, unless `allow_suite_change`: then only the tasks both played in the
    same content count."""
    candidate = GradedEpisodes.load(store, candidate_run)
    baseline = GradedEpisodes.load(store, baseline_run) if baseline_run else None
    compared = Compared(candidate, baseline, list(cases), None, list(notes))
    if baseline is not None:
        infos = [store.run(run_id) for run_id in (baseline.run_id, candidate.run_id)]
        assert infos[0] is not None and infos[1] is not None  # loaded above
        suite = compare_suites(run_suite(store, infos[0]), run_suite(store, infos[1]))
        compared.suite = suite
        compared.notes += check_suites(suite, allow_suite_change, str(store.path))
        if not suite.same:
            common = set(suite.common)
            compared.candidate = candidate.only_tasks(common)
            compared.baseline = baseline.only_tasks(common)
            compared.cases = [case for case in cases if case.task.id in common]
    return compared


def record_decision(
    store: Store, config: Gate, compared: Compared, result: GateResult
) -> GateResult:
    """Finish a decision on stored runs: the judge rule (a condition on the instrument, read
    from the store), the notes, and the decision appended to the store's gate history with the
    candidate run's own pass rate."""
    result.notes, result.suite = [*compared.notes, *result.notes], compared.suite
    runs = [compared.candidate.run_id, *([compared.baseline.run_id] if compared.baseline else [])]
    judged = judge_rule(config, store, runs)
    if judged is not None:
        result.add_rule(judged)
    rate = run_rate(compared.candidate.graded_outcomes()).estimate
    lines = [*result.reasons, *(f"undecided: {line}" for line in result.undecided)]
    store.add_gate_result(
        result.candidate_run, result.baseline_run, result.candidate_variant, result.passed,
        rate, lines, result.model_dump_json(),
    )  # fmt: skip
    return result


def decide(
    store: Store,
    config: Gate,
    compared: Compared,
    gathered: Gathered | None,
    why_not_played: str = "",
) -> GateResult:
    """The decision on the compared runs with the evidence gathered for them (None without a
    baseline), recorded (`record_decision`). Evidence wanted but not played is named in the
    result; trials one side lacks that could not be played are bad input (`SpecError`)."""
    if gathered is None:
        result = evaluate_gate(config, compared.candidate, None, compared.cases)
        return record_decision(store, config, compared, result)
    if unequal := unequal_trials(gathered.candidate, gathered.baseline):
        raise SpecError.at(
            Location(str(store.path)),
            "",
            f"the candidate and the baseline hold different trials of {len(unequal)} tasks "
            f"({', '.join(unequal[:5])}{', ...' if len(unequal) > 5 else ''}): the gate compares "
            f"the same trials on both sides and drops none, and could not play the others: "
            f"{why_not_played or 'not asked to play'}",
        )
    result = evaluate_gate(config, gathered.candidate, gathered.baseline, compared.cases)
    result.evidence = gathered.rounds
    if gathered.unplayed:
        result.unplayed = (
            f"wanted {gathered.unplayed.describe()}, not played: "
            f"{why_not_played or 'not asked to play'}"
        )
    return record_decision(store, config, compared, result)

"""The gate's judge rule: a judge's verdicts count only from a judge measured against people.

A judged check is one whose kind uses a judge (its class's `uses_judge`: `llm_judge`, or a
plug-in kind that declares it). A run's judge is the `judge_model` its grading pass recorded
(checks that name their own model use that one, and are keyed by it). The rule reads the newest
calibration of each judge that graded a hard judged check of a compared run (`harness judge
calibrate --store`), and fails when one is missing, holds fewer than
`min_judge_sessions` labelled sessions, or the lower end of its Cohen's kappa's 95% interval is
below `min_judge_kappa`.

Why the lower end and a minimum: kappa from a handful of sessions is mostly noise (5 sessions
on which judge and people agree give kappa 1.0), and a point estimate against a floor passes a
judge whose true kappa is 0.4 a 0.6 floor 17-26% of the time at 10-20 sessions. The interval's
lower end is a one-sided 97.5% bound (`Calibration.kappa_interval` says what it covers), so a
judge whose true kappa is below the floor passes at most about 2.5% of the time whatever the
number of sessions; `bench/judge_calibration.py` measures that rate and the rule's power. The
interval is computed from the stored confusion table, so a calibration kept before intervals
existed is read the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from harness.gate.figures import RuleCheck
from harness.grading.checks import uses_judge
from harness.specs.agent import ModelRef
from harness.specs.gate import Gate
from harness.store import Store

if TYPE_CHECKING:  # the calibration (and numpy) is imported by a gate that asks for a kappa
    from harness.production.calibrate import Calibration

RULE = "judge agreement"


def run_judges(store: Store, run_id: str) -> set[str]:
    """The keys of the judges of a run's hard (gating) judged check results."""
    info = store.run(run_id)
    default = (info.config.get("judge_model") if info else None) or None
    judged = any(
        check.gates and uses_judge(check.kind)
        for verdict in store.latest_verdicts(run_id)
        for check in verdict.checks
    )
    if not judged:
        return set()
    from harness.production.calibrate import judge_key

    return {judge_key(ModelRef.model_validate(default))} if default else {"(no judge recorded)"}


def judge_verdict(calibration: Calibration, floor: float, fewest: int) -> tuple[bool, str]:
    """Whether a judge's calibration lets its verdicts count, and the figures that say so: it
    needs at least `fewest` labelled sessions and the lower end of kappa's 95% interval at
    least `floor`."""
    sessions, interval, kappa = calibration.judged, calibration.kappa_interval, calibration.kappa
    shown = "undefined" if kappa is None else f"{kappa:.2f}"
    if interval is not None:
        shown += f" (95% {interval[0]:.2f} to {interval[1]:.2f})"
    if sessions < fewest:
        return False, (
            f"kappa {shown} on {sessions} labelled sessions, fewer than the {fewest} "
            "min_judge_sessions needs; calibrate on more sessions with human feedback"
        )
    ok = interval is not None and interval[0] >= floor
    return ok, (
        f"kappa {shown} on {sessions} labelled sessions: its lower end "
        f"{'>=' if ok else 'is below'} {floor:g}"
    )


def judge_rule(config: Gate, store: Store, runs: Sequence[str]) -> RuleCheck | None:
    """The rule's line, or None when the gate asks for no minimum or no compared run was
    graded by a hard judged check."""
    if config.min_judge_kappa is None:
        return None
    from harness.production.calibrate import Calibration

    judges = sorted({key for run_id in runs for key in run_judges(store, run_id)})
    if not judges:
        return None
    lines, passed = [], True
    for judge in judges:
        found = store.judge_calibration(judge)
        if found is None:
            passed = False
            lines.append(
                f"{judge} has no calibration against human feedback (harness judge calibrate "
                "--store)"
            )
            continue
        calibration = Calibration(table=dict(found["table"]))
        ok, figures = judge_verdict(calibration, config.min_judge_kappa, config.min_judge_sessions)
        passed = passed and ok
        lines.append(f"{judge}: {figures} ({found['at']})")
    detail = f"{RULE}: " + "; ".join(lines)
    return RuleCheck(rule=RULE, passed=passed, status="pass" if passed else "fail", detail=detail)

"""The gate's judge rule: llm_judge verdicts count only from a judge measured against people.

A run's judge is the `judge_model` its grading pass recorded (checks that name their own model
use that one, and are keyed by it). The rule reads the newest calibration of each judge that
graded a hard llm_judge check of a compared run (`harness judge calibrate --results-store`),
and fails when one is missing or its Cohen's kappa is below `min_judge_kappa`.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.gate.figures import RuleCheck
from harness.production.calibrate import judge_key
from harness.specs.agent import ModelRef
from harness.specs.gate import Gate
from harness.store import Store

RULE = "judge agreement"


def run_judges(store: Store, run_id: str) -> set[str]:
    """The keys of the judges of a run's hard (gating) llm_judge check results."""
    info = store.run(run_id)
    default = (info.config.get("judge_model") if info else None) or None
    judged = any(
        check.kind == "llm_judge" and check.gates
        for verdict in store.latest_verdicts(run_id)
        for check in verdict.checks
    )
    if not judged:
        return set()
    return {judge_key(ModelRef.model_validate(default))} if default else {"(no judge recorded)"}


def judge_rule(config: Gate, store: Store, runs: Sequence[str]) -> RuleCheck | None:
    """The rule's line, or None when the gate asks for no minimum or no compared run was
    graded by a hard llm_judge check."""
    if config.min_judge_kappa is None:
        return None
    judges = sorted({key for run_id in runs for key in run_judges(store, run_id)})
    if not judges:
        return None
    floor = config.min_judge_kappa
    lines, passed = [], True
    for judge in judges:
        found = store.judge_calibration(judge)
        if found is None:
            passed = False
            lines.append(
                f"{judge} has no calibration against human feedback (harness judge calibrate "
                "--results-store)"
            )
            continue
        kappa = found["kappa"]
        ok = kappa is not None and kappa >= floor
        passed = passed and ok
        shown = "undefined" if kappa is None else f"{kappa:.2f}"
        lines.append(
            f"{judge}: kappa {shown} {'>=' if ok else 'is below'} {floor:g} on "
            f"{found['judged']} labelled sessions ({found['at']})"
        )
    detail = f"{RULE}: " + "; ".join(lines)
    return RuleCheck(rule=RULE, passed=passed, status="pass" if passed else "fail", detail=detail)

"""`harness judge calibrate`: production sessions exported as JSONL with their users' feedback
(a 👍 on half, a 👎, a note or a "wrong" label on the other half), graded by a scripted judge
that passes a known subset, so that the confusion table is known exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ROOT, newest_run, run_cli, scripted_eval
from tests.test_trace_tasks import call, write_jsonl

GOOD = [{"feedback_type": "wandb.reaction.1", "payload": {"emoji": "👍"}}]
BAD = [
    [{"feedback_type": "wandb.reaction.1", "payload": {"emoji": "👎"}}],
    [{"feedback_type": "wandb.note.1", "payload": {"note": "it never looked up my order"}}],
    [{"feedback_type": "quality", "payload": {"value": "wrong"}}],
]
JUDGE_RULES = """kind: script
rules:
  - when: {matches: "(?s)GARBLED.*Criterion:"}
    reply: I cannot tell.
  - when: {matches: "(?s)RESOLVED.*Criterion:"}
    reply: '{"reasoning": "The agent resolved it.", "passed": true}'
  - when: {matches: "(?s)Criterion:"}
    reply: '{"reasoning": "Nothing was resolved.", "passed": false}'
"""
TASK = """kind: task
id: resolves
title: Resolve the request
level: 1
domain: support
persona: impatient
scenario:
  reason: You want your order status.
start:
  first_message: Where is my order?
checks:
  - kind: llm_judge
    criterion: The agent resolves the user's request.
"""


def session(n: int, reply: str, feedback: list | None) -> dict:
    said = [{"role": "user", "content": f"Where is my order O-{3000 + n}?"}]
    started = f"2026-11-30T10:00:{n:02d}"
    return call(f"t{n}", f"tr{n}", f"c{n}", "handle_turn", {"conversation": said}, reply,
                kind="agent", started=started, feedback=feedback)  # fmt: skip


def sessions(resolved: set[int], garbled: set[int] = frozenset()) -> list[dict]:
    """20 labelled sessions (0-9 marked good, 10-19 bad) and 2 without feedback; the agent says
    RESOLVED in `resolved` (the judge passes those) and GARBLED in `garbled` (it errs)."""
    found = []
    for n in range(22):
        feedback = GOOD if n < 10 else BAD[n % 3] if n < 20 else None
        reply = "RESOLVED: it ships today." if n in resolved else "Please wait."
        found.append(session(n, reply + (" GARBLED" if n in garbled else ""), feedback))
    return found


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "judge.yaml").write_text(JUDGE_RULES)
    (tmp_path / "task.yaml").write_text(TASK)
    return {"judge": tmp_path / "judge.yaml", "task": tmp_path / "task.yaml"}


def calibrate(source: Path, files: dict[str, Path], *more: str):
    judge = json.dumps({"id": "scripted", "script": str(files["judge"])})
    return run_cli("judge", "calibrate", "--source", source, "--check", files["task"],
                   "--judge-model", judge, *more)  # fmt: skip


def test_the_confusion_table_of_a_judge_that_agrees_on_a_known_subset(
    tmp_path: Path, files: dict[str, Path]
) -> None:
    # judge passes 8 of the good sessions and 3 of the bad ones
    passed = set(range(8)) | {10, 11, 12}
    source = write_jsonl(tmp_path / "calls.jsonl", sessions(passed))
    done = calibrate(source, files, "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    tp, fn, fp, tn = 8, 2, 3, 7
    assert found["table"] == {"pass_good": tp, "fail_good": fn, "pass_bad": fp, "fail_bad": tn}
    n = tp + fn + fp + tn
    assert found["judged"] == n and found["unlabelled"] == 2 and found["errors"] == []
    assert found["accuracy"] == pytest.approx((tp + tn) / n)
    low, high = found["accuracy_interval"]
    assert low < 0.75 < high
    chance = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / n**2
    assert found["kappa"] == pytest.approx(((tp + tn) / n - chance) / (1 - chance))
    assert found["bias"] == pytest.approx(fp / (tp + fp))
    shown = calibrate(source, files)
    assert shown.returncode == 0, shown.stderr
    rows = [line.split() for line in shown.stdout.splitlines()[:3]]
    assert rows == [["human", "good", "human", "bad"], ["judge", "pass", "8", "3"],
                    ["judge", "fail", "2", "7"]]  # fmt: skip
    assert "accuracy 75%" in shown.stdout and "kappa 0.50" in shown.stdout
    assert "20 judged, 0 judge error(s) left out, 2 without human feedback" in shown.stdout


def test_sessions_the_judge_errs_on_are_left_out_and_reported(
    tmp_path: Path, files: dict[str, Path]
) -> None:
    source = write_jsonl(
        tmp_path / "calls.jsonl", sessions(set(range(8)) | {10, 11, 12}, garbled={0, 19})
    )
    done = calibrate(source, files, "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["table"] == {"pass_good": 7, "fail_good": 2, "pass_bad": 3, "fail_bad": 6}
    assert [e["session"] for e in found["errors"]] == ["thread t0", "thread t19"]
    assert all("no valid judgement" in e["reason"] for e in found["errors"])
    assert found["judged"] == 18
    shown = calibrate(source, files)
    assert "18 judged, 2 judge error(s) left out" in shown.stdout
    assert "error thread t19: " in shown.stderr


def test_no_labelled_session_is_bad_input(tmp_path: Path, files: dict[str, Path]) -> None:
    unlabelled = [s for s in sessions(set()) if not s["feedback"]]
    done = calibrate(write_jsonl(tmp_path / "calls.jsonl", unlabelled), files)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"harness: no session with human feedback in {tmp_path / 'calls.jsonl'} (2 without)"
    ]


REFUND_CRITERION = "The agent explains why the refund is refused, citing the policy."
SUPPORT_JUDGE = {"id": "scripted", "script": str(ROOT / "agents/scripts/judge.yaml")}


def test_the_gate_counts_judge_verdicts_only_from_a_calibrated_judge(tmp_path: Path) -> None:
    """The support suite is graded by hard llm_judge checks of agents/scripts/judge.yaml; with
    `min_judge_kappa` the gate fails until that judge is calibrated, and passes or fails on its
    kappa. The calibration grades the labelled sessions with that same judge."""
    store = tmp_path / "results.db"
    scripted_eval(store, "agents/support-baseline.yaml")
    baseline = newest_run(store)
    scripted_eval(store, "agents/support-baseline.yaml", "--fresh")
    candidate = newest_run(store)

    def gate(kappa: float) -> tuple[int, dict]:
        config = tmp_path / "gate.yaml"
        config.write_text((ROOT / "ci/gate.yaml").read_text() + f"\nmin_judge_kappa: {kappa}\n")
        done = run_cli("gate", "--config", config, "--candidate", candidate, "--baseline",
                       baseline, "--store", store, "--json", "--junit", tmp_path / "j.xml",
                       "--markdown", tmp_path / "s.md")  # fmt: skip
        rules = {r["rule"]: r for r in json.loads(done.stdout)["gates"][0]["rules"]}
        return done.returncode, rules

    code, rules = gate(0.3)
    assert code == 1
    assert rules["judge agreement"]["detail"] == (
        "judge agreement: scripted judge.yaml has no calibration against human feedback "
        "(harness judge calibrate --results-store)"
    )
    # labelled sessions the support judge reads: it passes a reply that names the refund
    # window; it does in 8 of the 10 good sessions and 2 of the 10 bad ones
    task = tmp_path / "task.yaml"
    task.write_text(TASK.replace("The agent resolves the user's request.", REFUND_CRITERION))
    replies = ["Outside the refund window, sorry.", "I cannot refund that."]
    labelled = [
        session(n, replies[0 if n in {*range(8), 10, 11} else 1], GOOD if n < 10 else BAD[n % 3])
        for n in range(20)
    ]
    source = write_jsonl(tmp_path / "calls.jsonl", labelled)
    calibrated = run_cli("judge", "calibrate", "--source", source, "--check", task,
                         "--judge-model", json.dumps(SUPPORT_JUDGE), "--results-store", store,
                         "--json")  # fmt: skip
    assert calibrated.returncode == 0, calibrated.stderr
    kappa = json.loads(calibrated.stdout)["kappa"]
    assert kappa == pytest.approx(0.6)  # 80% agreement where chance gives 50%
    code, rules = gate(round(kappa - 0.05, 2))
    assert code == 0, rules
    assert rules["judge agreement"]["passed"] and f"kappa {kappa:.2f} >=" in rules[
        "judge agreement"]["detail"]  # fmt: skip
    code, rules = gate(round(min(kappa + 0.05, 1.0), 2))
    assert code == 1 and f"kappa {kappa:.2f} is below" in rules["judge agreement"]["detail"]

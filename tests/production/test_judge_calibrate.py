"""`harness judge calibrate`: production sessions exported as JSONL with their users' feedback
(a 👍 on half, a 👎, a note or a "wrong" label on the other half), graded by a scripted judge
that passes a known subset, so that the confusion table is known exactly; and the gate's judge
rule, which reads the lower end of kappa's interval and wants enough labelled sessions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.production.calibrate import Calibration
from harness.store import Store
from tests.conftest import ROOT, newest_run, run_cli, scripted_eval
from tests.production.test_trace_tasks import call, write_jsonl

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
    kappa = ((tp + tn) / n - chance) / (1 - chance)
    assert found["kappa"] == pytest.approx(kappa)
    # 20 sessions say little: the interval is wide, and holds the estimate
    low, high = found["kappa_interval"]
    assert -1 <= low < kappa - 0.2 and kappa + 0.2 < high <= 1
    # bias is signed: the judge passes 11 of 20, people marked 10 of 20 good
    assert found["pass_rate"] == pytest.approx(11 / 20) and found["good_rate"] == 0.5
    assert found["bias"] == pytest.approx((fp - fn) / n)
    low, high = found["bias_interval"]
    assert low < found["bias"] < high
    assert found["precision"] == pytest.approx(tp / (tp + fp))
    assert found["recall"] == pytest.approx(tp / (tp + fn))
    shown = calibrate(source, files)
    assert shown.returncode == 0, shown.stderr
    rows = [line.split() for line in shown.stdout.splitlines()[:3]]
    assert rows == [["human", "good", "human", "bad"], ["judge", "pass", "8", "3"],
                    ["judge", "fail", "2", "7"]]  # fmt: skip
    interval = found["kappa_interval"]
    assert "accuracy 75%" in shown.stdout
    assert f"kappa 0.50 (95% {interval[0]:.2f} to {interval[1]:.2f})" in shown.stdout
    assert "bias +5 points" in shown.stdout and "more lenient than people" in shown.stdout
    assert "precision 73% of its passes were good, recall 80%" in shown.stdout
    assert "20 judged, 0 judge error(s) left out, 2 without human feedback" in shown.stdout


def test_a_stricter_judge_shows_a_negative_bias(tmp_path: Path, files: dict[str, Path]) -> None:
    """A judge that never passes a bad session but fails half the good ones: every pass is
    right (the old bias, the share of passes marked bad, read 0), yet it passes 25 points fewer
    sessions than people marked good."""
    source = write_jsonl(tmp_path / "calls.jsonl", sessions(set(range(5))))
    found = json.loads(calibrate(source, files, "--json").stdout)
    assert found["table"] == {"pass_good": 5, "fail_good": 5, "pass_bad": 0, "fail_bad": 10}
    assert found["bias"] == pytest.approx(-0.25) and found["precision"] == 1.0
    assert found["bias_interval"][1] < 0  # stricter than people, beyond noise
    shown = calibrate(source, files)
    assert "bias -25 points" in shown.stdout and "stricter than people" in shown.stdout


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
    `min_judge_kappa` the gate fails until that judge is calibrated on enough labelled sessions,
    and then passes or fails on the lower end of kappa's interval, not on kappa itself. The
    calibration grades the labelled sessions with that same judge."""
    store = tmp_path / "results.db"
    scripted_eval(store, "agents/support-baseline.yaml")
    baseline = newest_run(store)
    scripted_eval(store, "agents/support-baseline.yaml", "--fresh")
    candidate = newest_run(store)

    def gate(kappa: float, sessions: int | None = None) -> tuple[int, dict]:
        config = tmp_path / "gate.yaml"
        more = f"\nmin_judge_kappa: {kappa}\n"
        if sessions is not None:
            more += f"min_judge_sessions: {sessions}\n"
        config.write_text((ROOT / "ci/gate.yaml").read_text() + more)
        done = run_cli("gate", "--config", config, "--candidate", candidate, "--baseline",
                       baseline, "--store", store, "--json", "--junit", tmp_path / "j.xml",
                       "--markdown", tmp_path / "s.md")  # fmt: skip
        rules = {r["rule"]: r for r in json.loads(done.stdout)["gates"][0]["rules"]}
        return done.returncode, rules

    code, rules = gate(0.3)
    assert code == 1
    assert rules["judge agreement"]["detail"] == (
        "judge agreement: scripted judge.yaml has no calibration against human feedback "
        "(harness judge calibrate --store)"
    )
    # labelled sessions the support judge reads: it passes a reply that names the refund
    # window; it does in 80% of the good sessions and 20% of the bad ones
    task = tmp_path / "task.yaml"
    task.write_text(TASK.replace("The agent resolves the user's request.", REFUND_CRITERION))
    replies = ["Outside the refund window, sorry.", "I cannot refund that."]

    def calibrated(count: int) -> dict:
        half = count // 2
        passed = {*range(half * 4 // 5), *range(half, half + half // 5)}
        labelled = [
            session(n, replies[0 if n in passed else 1], GOOD if n < half else BAD[n % 3])
            for n in range(count)
        ]
        source = write_jsonl(tmp_path / f"calls{count}.jsonl", labelled)
        done = run_cli("judge", "calibrate", "--source", source, "--check", task,
                       "--judge-model", json.dumps(SUPPORT_JUDGE), "--store", store,
                       "--json")  # fmt: skip
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    # 20 sessions: fewer than the default min_judge_sessions (30), whatever kappa says
    few = calibrated(20)
    assert few["kappa"] == pytest.approx(0.6)  # 80% agreement where chance gives 50%
    code, rules = gate(0.1)
    detail = rules["judge agreement"]["detail"]
    assert code == 1 and "on 20 labelled sessions, fewer than the 30 min_judge_sessions" in detail
    low, high = few["kappa_interval"]
    assert f"kappa 0.60 (95% {low:.2f} to {high:.2f})" in detail
    code, rules = gate(round(low - 0.05, 2), sessions=20)  # a config may ask for fewer
    assert code == 0, rules

    # 40 sessions, the same 80% agreement: kappa 0.6, its interval narrower but still wide
    many = calibrated(40)
    assert many["judged"] == 40 and many["kappa"] == pytest.approx(0.6)
    low, high = many["kappa_interval"]
    assert few["kappa_interval"][0] < low < 0.5 and 0.6 < high < few["kappa_interval"][1]
    code, rules = gate(round(low - 0.05, 2), sessions=40)
    detail = rules["judge agreement"]["detail"]
    assert code == 0 and rules["judge agreement"]["passed"], rules
    assert (
        f"kappa 0.60 (95% {low:.2f} to {high:.2f}) on 40 labelled sessions: its lower end >="
        in (detail)
    )
    # a floor below kappa but above the interval's lower end: the point estimate alone would
    # pass; the rule does not
    code, rules = gate(0.5, sessions=40)
    assert code == 1 and "its lower end is below 0.5" in rules["judge agreement"]["detail"]


def test_a_calibration_kept_before_intervals_is_read_from_its_table(tmp_path: Path) -> None:
    """A store written before kappa had an interval keeps the confusion table in the report;
    the gate's rule computes the interval from it."""
    path = tmp_path / "results.db"
    scripted_eval(path, "agents/support-baseline.yaml")
    baseline = newest_run(path)
    scripted_eval(path, "agents/support-baseline.yaml", "--fresh")
    candidate = newest_run(path)
    table = {"pass_good": 30, "pass_bad": 2, "fail_good": 3, "fail_bad": 25}
    old = {"table": table, "judged": 60, "accuracy": 55 / 60, "kappa": 0.83, "bias": 2 / 32}
    store = Store(path)
    try:
        store.add_judge_calibration(
            "scripted judge.yaml", "old.jsonl", 60, 0.83, 55 / 60, json.dumps(old)
        )
    finally:
        store.close()
    low, high = Calibration(table=table).kappa_interval or (0.0, 0.0)
    assert 0.6 < low < 0.83 < high
    config = tmp_path / "gate.yaml"
    config.write_text((ROOT / "ci/gate.yaml").read_text() + "\nmin_judge_kappa: 0.6\n")
    done = run_cli("gate", "--config", config, "--candidate", candidate, "--baseline", baseline,
                   "--store", path, "--json")  # fmt: skip
    rules = {r["rule"]: r for r in json.loads(done.stdout)["gates"][0]["rules"]}
    assert rules["judge agreement"]["passed"], rules["judge agreement"]
    assert f"kappa 0.83 (95% {low:.2f} to {high:.2f}) on 60 labelled sessions" in rules[
        "judge agreement"]["detail"]  # fmt: skip

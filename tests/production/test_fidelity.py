"""`harness fidelity`: a run's simulated users against production's, per dimension, as a 0-100
index with its bootstrap interval, the easy-mode dimensions named, and the outcome calibration
of tasks made from production; the report is kept with the run and shown in its HTML report.
(The recorded two-population app and the bundled against the mined personas:
tests/production/test_personas_recorded.py.)"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from harness.fidelity import DIMENSIONS, FidelityReport, compare_behaviour, outcome_calibration
from harness.grading.result import Verdict
from harness.production.behaviour import SessionBehaviour, measure
from harness.store.tasks import StoredTask, TaskLabels
from harness.transcript import Message
from tests.apps.repair_desk_app import simulate
from tests.conftest import newest_run, run_cli, scripted_eval
from tests.production.test_behaviour_profiles import front_loading, gradual, session_calls


def sessions(seed: int, count: int, gradual_share: float) -> list[SessionBehaviour]:
    """Sessions of the mix of tests/production/test_behaviour_profiles.py, measured."""
    rng = random.Random(seed)
    found = []
    for n in range(count):
        turns = gradual(rng, 0.8) if rng.random() < gradual_share else front_loading(rng, 0.1, 0.3)
        messages = []
        for text, reply in turns:
            messages.append(Message(role="user", content=text))
            if reply is not None:
                messages.append(Message(role="assistant", content=reply))
        found.append(measure(messages, f"s{n}"))
    return found


def test_the_same_population_agrees_and_a_front_loading_one_is_easy_mode() -> None:
    production = sessions(1, 300, 0.7)
    tasks = [f"t{n // 3}" for n in range(150)]  # 50 tasks x 3 trials
    same = compare_behaviour(sessions(2, 150, 0.7), tasks, production, bootstrap=300)
    easy = compare_behaviour(sessions(3, 150, 0.0), tasks, production, bootstrap=300)
    assert [d.name for d in same.dimensions] == list(DIMENSIONS)
    assert same.index is not None and easy.index is not None
    assert same.index >= 90, same.index
    assert same.interval[0] <= same.index <= same.interval[1]
    assert same.interval[0] < 100 < same.interval[1], same.interval
    assert [p.name for p in same.populations] == ["gradual, pushes back", "front-loading, pivots"]
    assert same.coverage is not None and same.coverage > 0.9
    assert same.easy_mode == []
    assert easy.interval[1] < same.interval[0], (easy.interval, same.interval)
    assert "disclosure_first" in easy.easy_mode and "pushback" in easy.easy_mode
    row = {d.name: d for d in easy.dimensions}["disclosure_first"]
    assert row.simulated.mean == pytest.approx(1.0) and row.production.mean < 0.6
    assert row.difference_interval[0] > 0 and "front-load more" in row.note
    assert "50 simulated tasks" in easy.covers and "300 production sessions" in easy.covers


def test_a_simulator_like_production_reads_about_100_at_any_size() -> None:
    """Samples of one population compared with each other: the plug-in distances read them as
    different by their noise, the more so the smaller the samples; the corrected index does
    not depend on the size, and its mean is 100 within its Monte Carlo error."""
    found: dict[int, tuple[list[float], list[float]]] = {}
    for tasks in (10, 40):
        corrected, plug_in = [], []
        for seed in range(12):
            sim = sessions(100 + seed, 3 * tasks, 0.7)
            names = [f"t{n // 3}" for n in range(3 * tasks)]
            report = compare_behaviour(sim, names, sessions(200 + seed, 3 * tasks, 0.7), 200)
            assert report.index is not None and report.plug_in_index is not None
            corrected.append(report.index)
            plug_in.append(report.plug_in_index)
        found[tasks] = corrected, plug_in
    for tasks, (corrected, plug_in) in found.items():
        error = 3 * float(np.std(corrected)) / np.sqrt(len(corrected)) + 0.5
        assert abs(np.mean(corrected) - 100) < error, (tasks, np.mean(corrected), error)
        assert np.mean(plug_in) < 97, (tasks, np.mean(plug_in))
    assert np.mean(found[10][1]) < np.mean(found[40][1]) - 1  # plug-in: biased by the size


def test_a_dimension_reports_its_plug_in_agreement_and_noise() -> None:
    """Each dimension keeps the plug-in agreement and the noise the correction came from; the
    corrected agreement is the plug-in one plus at most that noise, and the index is the
    coverage of production's populations times the mean over families of the corrected
    agreements."""
    production = sessions(1, 150, 0.7)
    report = compare_behaviour(
        sessions(3, 150, 0.2), [f"t{n // 3}" for n in range(150)], production, bootstrap=300
    )
    assert report.plug_in_index is not None and report.index is not None
    assert report.index > report.plug_in_index
    for row in report.dimensions:
        if row.agreement is None:
            assert row.plug_in is None and row.noise is None
            continue
        assert row.plug_in is not None and row.noise is not None
        assert row.plug_in <= row.agreement <= row.plug_in + row.noise + 1e-9, row
    families = [f for f in report.families.values() if f is not None]
    assert report.coverage is not None
    assert report.index == pytest.approx(100 * report.coverage * float(np.mean(families)))
    # a report stored before the correction (no plug-in figures) still reads
    stored = report.model_dump(mode="json")
    del stored["plug_in_index"], stored["coverage"], stored["populations"]
    for row in stored["dimensions"]:
        del row["plug_in"], row["noise"]
    assert FidelityReport.model_validate(stored).dimensions[0].plug_in is None


def repair_sessions(seed: int) -> tuple[list[SessionBehaviour], list[str]]:
    """A sample of tests/apps/repair_desk_app.py's three populations (50% terse front-loaders, 30%
    gradual disclosers who push back, 20% impatient users who abandon), measured, with each
    session's population."""
    played = simulate(seed=seed)
    found = [
        measure(
            [
                Message(role=role, content=content)
                for text, reply in session.exchanged
                for role, content in (("user", text), ("assistant", reply))
            ],
            key,
        )
        for key, session in played.items()
    ]
    return found, [session.population for session in played.values()]


def test_a_simulated_mix_that_lost_a_population_reads_at_least_10_points_lower() -> None:
    """Production: a sample of the repair desk's three populations. Simulated: another sample
    of them, and the same sample without one population (the others in their proportions,
    each user as before). Whichever population is lost, the index drops by at least 10 points
    and the report shows that population's simulated share at 0. The mean over families of the
    dimensions' agreement, the index before it read populations, moves by less than half as
    much when the impatient users (a fifth of the traffic) are lost: each dimension moves by at
    most their share, and most do not move at all."""
    production, _ = repair_sessions(38)
    simulated, kinds = repair_sessions(1)
    full = compare_behaviour(simulated, [b.key for b in simulated], production, bootstrap=300)
    assert full.index is not None and full.coverage is not None and full.coverage > 0.9
    assert len(full.populations) == 3
    names = {"T": "front-loading, accepts", "G": "gradual, pushes back"}
    names["I"] = "front-loading, abandons"
    assert {p.name for p in full.populations} == set(names.values())

    def families(report: FidelityReport) -> float:
        return 100 * float(np.mean([f for f in report.families.values() if f is not None]))

    for lost, name in names.items():
        kept = [b for b, kind in zip(simulated, kinds, strict=True) if kind != lost]
        report = compare_behaviour(kept, [b.key for b in kept], production, bootstrap=300)
        assert report.index is not None and report.index <= full.index - 10, (lost, report.index)
        [row] = [p for p in report.populations if p.name == name]
        assert row.simulated_share == 0 and row.production_share > 0.15, row
        if lost == "I":  # the mean over families saw less than half of the loss
            before = families(full) - families(report)
            assert before < (full.index - report.index) / 2, (before, full.index, report.index)


def test_a_dimension_with_too_few_values_is_left_out_and_named() -> None:
    production = sessions(1, 100, 0.7)
    # no agent error on the simulated side: no reaction to compare
    calm = [measure([Message(role="user", content=f"Order O-{n}?")], f"c{n}") for n in range(20)]
    report = compare_behaviour(calm, [f"t{n}" for n in range(20)], production, bootstrap=100)
    row = {d.name: d for d in report.dimensions}["pushback"]
    assert row.agreement is None and row.note.startswith("left out: 0 simulated")
    assert report.families["error reaction"] is None and report.index is not None


def stored(task_id: str, kind: str | None, count: int = 1) -> StoredTask:
    spec = {"id": task_id} | ({"source": {"kind": kind, "count": count}} if kind else {})
    return StoredTask(TaskLabels(task_id, 1, ()), "", spec)


def verdicts(task_id: str, *outcomes: str) -> list[Verdict]:
    return [Verdict(task_id=task_id, trial=n, outcome=o) for n, o in enumerate(outcomes)]


def test_outcome_calibration_weighs_tasks_by_their_sessions() -> None:
    tasks = [stored("ok", "success", 3), stored("bad", "failure", 1), stored("own", None)]
    graded = [
        *verdicts("ok", "pass", "pass"),
        *verdicts("bad", "pass", "error", "fail"),
        *verdicts("own", "fail"),
    ]
    found = outcome_calibration(tasks, graded, bootstrap=200)
    assert found is not None and found.tasks == 2 and found.sessions == 4
    assert found.production_success == pytest.approx(0.75)
    assert found.simulated_pass == pytest.approx((3 * 1.0 + 1 * 0.5) / 4)
    assert found.gap == pytest.approx(0.125)
    assert {r.task_id: r.graded for r in found.rows} == {"ok": 2, "bad": 2}
    assert outcome_calibration([stored("own", None)], verdicts("own", "pass")) is None


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path | str]:
    """The support suite played by the scripted agent, and 120 production sessions."""
    folder = tmp_path_factory.mktemp("fidelity")
    store = folder / "r.db"
    scripted_eval(store, "agents/support-baseline.yaml", "--trials", "2")
    rng = random.Random(5)
    calls = [
        call
        for n in range(120)
        for call in session_calls(
            f"s{n}", gradual(rng, 0.8) if n % 3 else front_loading(rng, 0.1, 0.3)
        )
    ]
    export = folder / "calls.jsonl"
    export.write_text("".join(json.dumps(c) + "\n" for c in calls))
    return {"store": store, "export": export, "run": newest_run(store), "folder": folder}


def test_the_command_reports_keeps_and_shows_the_report(run: dict) -> None:
    html = run["folder"] / "report.html"
    done = run_cli(
        "fidelity", run["run"], "--against", run["export"], "--store", run["store"],
        "--bootstrap", "200", "--json", "--html", html,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["production_sessions"] == 120 and report["simulated_sessions"] > 0
    low, high = report["interval"]
    assert 0 <= low <= report["index"] <= high <= 100
    assert len(report["dimensions"]) == len(DIMENSIONS)
    page = html.read_text()
    assert "Are the simulated users realistic?" in page
    assert f"{report['index']:.1f}" in page
    for name in report["easy_mode"]:
        assert name in page
    shown = run_cli("report", run["run"], "--store", run["store"], "--out", html)
    assert shown.returncode == 0 and "Are the simulated users realistic?" in html.read_text()
    text = run_cli(
        "fidelity", run["run"], "--against", run["export"], "--store", run["store"],
        "--bootstrap", "200", COLUMNS="200",
    )  # fmt: skip
    assert text.returncode == 0, text.stderr
    assert f"fidelity index {report['index']:.1f} / 100 (95% interval" in text.stdout
    assert "easy-mode dimensions:" in text.stdout


def test_bad_input_is_one_line_and_exit_2(run: dict) -> None:
    missing = run_cli("fidelity", run["run"], "--against", "nowhere.jsonl", "--store", run["store"])
    assert missing.returncode == 2
    assert "--against nowhere.jsonl" in missing.stderr and "Traceback" not in missing.stderr
    unknown = run_cli(
        "fidelity", "no-such-run", "--against", run["export"], "--store", run["store"]
    )
    assert unknown.returncode == 2 and "no-such-run" in unknown.stderr


DAG = """kind: dag
name: fidelity
nodes:
  tasks: {{uses: load_tasks, with: {{paths: [{tasks}]}}}}
  play:
    uses: simulate
    needs: [tasks]
    with:
      agent: {agent}
      set: ["model={{id: scripted, script: {script}}}"]
  users:
    uses: fidelity
    needs: [play]
    with: {{against: {export}, bootstrap: 200}}
  report:
    uses: report
    needs: [users]
    with: {{html: {html}}}
"""


def test_the_fidelity_node_keeps_the_report_for_the_html(run: dict) -> None:
    from tests.conftest import ROOT

    folder = run["folder"]
    dag = folder / "dag.yaml"
    html = folder / "node.html"
    dag.write_text(
        DAG.format(
            tasks=ROOT / "tasks/support",
            agent=ROOT / "agents/support-baseline.yaml",
            script=ROOT / "agents/scripts/support.yaml",
            export=run["export"],
            html=html,
        )
    )
    done = run_cli("run-eval", dag, "--store", folder / "node.db", "--no-traces")
    assert done.returncode == 0, done.stderr
    assert "Are the simulated users realistic?" in html.read_text()
    bad = dag.read_text().replace(str(run["export"]), str(folder / "none.jsonl"))
    dag.write_text(bad)
    refused = run_cli("run-eval", dag, "--store", folder / "node.db", "--no-traces")
    assert refused.returncode == 2 and "fidelity node: against" in refused.stderr, refused.stderr

"""The gate's baselines and its history as a W&B artifact (type `gate-baseline`), for teams
that keep everything in W&B: one row per suite's baseline (its run, variant, pass rate and
interval) and every gate decision: JSON files in the artifact, tables in its run.

Offline by default, like every W&B run of the harness: the files are written in the run's
folder (`<dir>/wandb/offline-run-*/files/gate-baseline/`) and the artifact goes up with
`wandb sync`; online when asked and logged in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.api.stored import open_store
from harness.gate.suites import SUITE_PREFIX, run_suite, suite_id
from harness.pipeline.nodes.log_wandb import finished, start_wandb_run
from harness.pipeline.types import WandbRun
from harness.report.summary import run_figures
from harness.specs.located import Location, SpecError
from harness.specs.wandb import WandbTarget
from harness.store import Store
from harness.store_location import StoreLocation, StoreTarget

ARTIFACT_TYPE = "gate-baseline"
FILES = ("baselines.json", "gate_history.json")


@dataclass
class PublishedBaselines:
    """What was published, and the W&B run that holds it."""

    artifact: str
    baselines: int
    decisions: int
    run: WandbRun
    files: list[Path]


def baseline_rows(store: Store, suite: str | None = None) -> list[dict[str, Any]]:
    """Each suite's baseline (or the one suite's), the most recently set first."""
    rows = []
    for name, run_id, set_at in store.baselines():
        if suite is not None and name.removeprefix(SUITE_PREFIX) != suite:
            continue
        info = store.run(run_id)
        if info is None:
            continue
        figures = run_figures(store, run_id)
        rows.append(
            {
                "suite": name.removeprefix(SUITE_PREFIX),
                "run_id": run_id,
                "set_at": set_at,
                "variant": info.variant,
                "variant_hash": info.variant_hash,
                "pass_rate": figures.rate,
                "pass_rate_low": figures.low,
                "pass_rate_high": figures.high,
                "passed": figures.passed,
                "graded": figures.graded,
            }
        )
    return rows


def history_rows(store: Store, suite: str | None = None) -> list[dict[str, Any]]:
    """The gate's decisions, oldest first (with a suite: on candidates of that suite)."""
    rows = []
    for row in store.gate_history():
        entry = {**row, "passed": bool(row["passed"]), "reasons": json.loads(row["reasons"])}
        if suite is not None:
            info = store.run(row["candidate_run"])
            if info is None or suite_id(run_suite(store, info)) != suite:
                continue
        rows.append(entry)
    return rows


def publish_baselines(
    location: StoreTarget, target: WandbTarget, suite: str | None = None
) -> PublishedBaselines:
    """Log the baselines and the gate history of a store as one W&B artifact. A store with no
    baseline (of the suite) is bad input, and no W&B run is started."""
    import wandb

    where = StoreLocation.of(location)
    store = open_store(where)
    try:
        baselines, history = baseline_rows(store, suite), history_rows(store, suite)
    finally:
        store.close()
    if not baselines:
        of = f" of suite {suite}" if suite else ""
        raise SpecError.at(Location(str(where)), "", f"no baseline{of} (harness baseline set RUN)")
    name = ARTIFACT_TYPE + (f"-{suite}" if suite else "")
    config = {"store": str(where), "suite": suite}
    run = start_wandb_run(target, name, ARTIFACT_TYPE, config)
    try:
        folder = Path(run.dir) / ARTIFACT_TYPE
        folder.mkdir(parents=True, exist_ok=True)
        files = [folder / file for file in FILES]
        for file, rows in zip(files, (baselines, history), strict=True):
            file.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
        artifact = wandb.Artifact(
            name,
            type=ARTIFACT_TYPE,
            description="The CI gate's baseline per suite and its decisions",
            metadata={"baselines": len(baselines), "decisions": len(history), "suite": suite},
        )
        for file in files:  # referenced where they are: the run's folder holds everything
            artifact.add_file(str(file), policy="immutable")
        run.log_artifact(artifact)
        run.log({"baselines": _table(baselines), "gate_history": _table(history)})
        run.summary.update({"baselines": len(baselines), "decisions": len(history)})
    finally:
        outcome = finished(run)
    return PublishedBaselines(name, len(baselines), len(history), outcome, files)


def _table(rows: list[dict[str, Any]]) -> Any:
    """A W&B table of rows (lists as JSON text, so that every column has one type)."""
    import wandb

    names = list(rows[0]) if rows else ["empty"]
    data = [[_cell(row[c]) for c in names] for row in rows]
    columns: list[str | int] = list(names)
    return wandb.Table(columns=columns, data=data)


def _cell(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, list | dict) else value

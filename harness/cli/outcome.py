"""A finished pipeline, printed: every report, the nodes' states, the runs whose every episode
errored (and why the exit code is what it is), or with --json one JSON summary."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.cli._common import (
    EXIT_DECISION,
    EXIT_HARNESS,
    make_console,
    print_json,
    warn_unsandboxed,
)
from harness.defaults import MAX_ERROR_RATE
from harness.store_location import StoreLocation

if TYPE_CHECKING:
    from harness.api.pipeline import Outcome
    from harness.report.summary import RunFigures
    from harness.store import Store


@dataclass(frozen=True)
class ErroredRun:
    """A graded run with more errored episodes than a gate accepts (its max_error_rate,
    `RunFigures.too_many_errors`): its pass rate is no result, and nothing it says about the
    agent stands."""

    run_id: str
    sides: dict[str, int]  # errors by the side that failed
    episodes: int = 0  # stored, graded or not (0: as many as errored)

    @property
    def agent_only(self) -> bool:
        """Whether the agent under test is the only side that failed: a result about the agent,
        not a failure of the harness. (Its failures are graded as fails now, so only episodes
        recorded by an older harness err on the `agent` side; its model provider's are
        `agent_model`, missing evidence like the other sides'.)"""
        return set(self.sides) == {"agent"}

    @property
    def exit_code(self) -> int:
        return EXIT_DECISION if self.agent_only else EXIT_HARNESS

    def line(self) -> str:
        """One line saying so, and why the exit code is what it is."""
        by_side = ", ".join(f"{side} {n}" for side, n in sorted(self.sides.items()))
        errors = sum(self.sides.values())
        why = (
            "the agent under test failed"
            if self.agent_only
            else "the harness or what it runs on (the agent's model provider, tools, user "
            "simulator, judge) failed, not the agent"
        )
        if errors >= self.episodes:
            return (
                f"run {self.run_id}: every episode errored ({by_side}), none graded: {why} "
                f"(exit {self.exit_code})"
            )
        return (
            f"run {self.run_id}: {errors} of {self.episodes} episodes errored ({by_side}), "
            f"more than the {MAX_ERROR_RATE:.0%} a gate accepts: {why} (exit {self.exit_code})"
        )


def errored_runs(
    store: Store, outcome: Outcome, known: Mapping[str, RunFigures] | None = None
) -> list[ErroredRun]:
    """The graded runs of a pipeline with too many errored episodes (`RunFigures.too_many_errors`:
    more than a gate's default `max_error_rate`); `known` holds figures already read."""
    from harness.report.summary import run_figures

    errored = []
    for run_id in sorted(outcome.graded):
        figures = (known or {}).get(run_id) or run_figures(store, run_id)
        if figures.too_many_errors:
            errored.append(ErroredRun(run_id, dict(figures.errors_by_side), figures.episodes))
    return errored


def outcome_exit_code(outcome: Outcome, errored: list[ErroredRun] | None = None) -> int:
    """3 when a node failed (the harness could not finish: no decision stands) or a run's
    errored episodes are more than a gate accepts, on a side other than the agent's; 1 when on
    the agent's side only, or a reported gate blocks (failed, or UNDECIDED under on_undecided:
    fail); else 0."""
    if outcome.execution.failed:
        return EXIT_HARNESS
    if errored:
        return max(run.exit_code for run in errored)
    blocked = any(gate.result.blocks for report in outcome.reports for gate in report.gates)
    return EXIT_DECISION if blocked else 0


def print_outcome(outcome: Outcome, store_path: StoreLocation, as_json: bool = False) -> int:
    """Print every report and the pipeline's summary, or with --json one JSON object (the
    sandbox warnings then go to stderr); the exit code of `outcome_exit_code`."""
    from harness.api.pipeline import outcome_summary
    from harness.report.terminal import print_report
    from harness.secrets import redact
    from harness.store import Store

    execution = outcome.execution
    store = outcome.store or Store(store_path)  # the pipeline's, when it kept it open
    if as_json:
        print_json(outcome_summary(outcome, store))
    console = make_console(stderr=as_json)
    shown: dict[str, RunFigures] = {}
    try:
        for output in [] if as_json else outcome.reports:
            shown |= print_report(store, output.contents(), console)
            for file in output.files:
                console.print(f"wrote {file}")
        for run_id in sorted(outcome.graded):
            warn_unsandboxed(store, run_id, console)
        errored = errored_runs(store, outcome, shown)
    finally:
        store.close()
        outcome.store = None
    if as_json:
        for run in errored:
            console.print(run.line(), style="red", markup=False, highlight=False, soft_wrap=True)
        return outcome_exit_code(outcome, errored)
    states = ", ".join(f"{node} {status.state}" for node, status in execution.statuses.items())
    console.print(f"pipeline {outcome.pipeline_id} ({outcome.plan.name}): {states}")
    for node, status in execution.statuses.items():
        if status.error:
            line = f"node {node} failed: {redact(status.error)}"
            console.print(line, style="red", markup=False, highlight=False)
    for run in errored:
        console.print(run.line(), style="red", markup=False, highlight=False, soft_wrap=True)
    console.print(f"stored in {store_path}")
    return outcome_exit_code(outcome, errored)

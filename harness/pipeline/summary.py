"""A finished pipeline as one machine-readable summary (`--json`): its runs, comparisons and
gate decisions in the order of its nodes, and what each node did."""

from __future__ import annotations

from harness.pipeline.runner import Outcome
from harness.pipeline.types import Comparison, GateDecision, Report, Run
from harness.report.json_summary import ResultsSummary, results_summary
from harness.secrets import redact
from harness.store import Store


def outcome_summary(outcome: Outcome, store: Store) -> ResultsSummary:
    """Every run a node produced, every comparison and gate decision, the report files, and
    each node's state (with a failed node's error, secrets masked), read from the open store."""
    execution = outcome.execution
    outputs = [execution.outputs[n] for n in outcome.plan.nodes if n in execution.outputs]
    summary = results_summary(
        store,
        [output.run_id for output in outputs if isinstance(output, Run)],
        [output.result for output in outputs if isinstance(output, Comparison)],
        [output.result for output in outputs if isinstance(output, GateDecision)],
        [file for output in outputs if isinstance(output, Report) for file in output.files],
    )
    summary.pipeline_id, summary.name = outcome.pipeline_id, outcome.plan.name
    summary.nodes = {node: status.state for node, status in execution.statuses.items()}
    summary.node_errors = {
        node: redact(status.error) for node, status in execution.statuses.items() if status.error
    }
    return summary

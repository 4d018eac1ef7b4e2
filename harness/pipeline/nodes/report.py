"""`report`: collect runs, comparisons and gate decisions for the terminal, and write the
Markdown summary, JUnit XML and HTML report files asked for. A `fidelity` need reports its run;
the HTML report reads the run's sim-to-real report from the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from harness.pipeline.nodes import NodeContext, NodeKind, register
from harness.pipeline.types import Comparison, Fidelity, GateDecision, Graded, Report
from harness.specs.base import Spec


class ReportParams(Spec):
    """Files to write besides the terminal summary."""

    markdown: str | None = Field(default=None, description="Write a Markdown summary here.")
    junit: str | None = Field(default=None, description="Write JUnit XML of gated runs here.")
    html: str | None = Field(
        default=None,
        description="Write the self-contained HTML report here (`harness report`): the gate's "
        "baseline against its candidate, else the comparison's runs, else the first run.",
    )


async def run(params: ReportParams, inputs: list[Any], ctx: NodeContext) -> Report:
    from harness.report.files import write_reports

    report = Report(
        runs=[i for i in inputs if isinstance(i, Graded)],
        comparisons=[i for i in inputs if isinstance(i, Comparison)],
        gates=[i for i in inputs if isinstance(i, GateDecision)],
        fidelity=[i for i in inputs if isinstance(i, Fidelity)],
    )
    markdown = Path(params.markdown) if params.markdown else None
    junit = Path(params.junit) if params.junit else None
    html = Path(params.html) if params.html else None
    written = write_reports(ctx.store, report.contents(), markdown, junit, html)
    report.files += [str(path) for path in written]
    return report


def restore(output: Report, inputs: list[Any]) -> Report:
    """A reused report's runs are its inputs' again: the stored ones have lost their tasks (and
    with them each task's level, which the summary shows)."""
    return output.model_copy(update={"runs": [i for i in inputs if isinstance(i, Graded)]})


register(
    NodeKind(
        "report",
        ReportParams,
        ((Graded, Comparison, GateDecision, Fidelity),),
        Report,
        run,
        variadic=True,
        restore=restore,
    )
)

"""Write a report's files: the Markdown summary, the JUnit XML and the HTML report, for the
`report` node and the `gate` and `compare` commands alike."""

from __future__ import annotations

from pathlib import Path

from harness.report.contents import ReportContents
from harness.report.junit import write_junit
from harness.report.markdown import render_markdown
from harness.store import Store


def html_runs(contents: ReportContents) -> tuple[str, str | None] | None:
    """The runs an HTML report of these contents shows: a gate's baseline (A) and candidate
    (B), else a comparison's A and B, else the first run alone; None when there is no run."""
    for gate in contents.gates:
        if gate.baseline_run is None:
            return gate.candidate_run, None
        return gate.baseline_run, gate.candidate_run
    for comparison in contents.comparisons:
        return comparison.a.run_id, comparison.b.run_id
    return (contents.runs[0].run_id, None) if contents.runs else None


def write_reports(
    store: Store,
    contents: ReportContents,
    markdown: Path | None,
    junit: Path | None,
    html: Path | None = None,
) -> list[Path]:
    """Write the files asked for (folders made as needed); the files written, in order."""
    written = []
    if markdown is not None:
        markdown.parent.mkdir(parents=True, exist_ok=True)
        markdown.write_text(render_markdown(store, contents))
        written.append(markdown)
    if junit is not None:
        write_junit(store, contents, junit)
        written.append(junit)
    runs = html_runs(contents)
    if html is not None and runs is not None:
        from harness.report.html import write_html_report  # jinja2 and the pages: when asked

        written.append(write_html_report(store, *runs, html))
    return written

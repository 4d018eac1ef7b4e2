"""Write a report's files: the Markdown summary and the JUnit XML, for the `report` node and the
`gate` and `compare` commands alike."""

from __future__ import annotations

from pathlib import Path

from harness.report.contents import ReportContents
from harness.report.junit import write_junit
from harness.report.markdown import render_markdown
from harness.store import Store


def write_reports(
    store: Store, contents: ReportContents, markdown: Path | None, junit: Path | None
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
    return written

"""The HTML report: one self-contained file per run (inline CSS, JS and SVG charts, no network),
and the same pages for the viewer (`harness.view`). `page` reads what a page shows from the
store, `render` turns it into HTML through the templates in `templates/`."""

from __future__ import annotations

from pathlib import Path

from harness.report.html.page import ReportPage, build_report
from harness.report.html.render import report_html
from harness.store import Store

__all__ = ["ReportPage", "build_report", "report_html", "write_html_report"]


def write_html_report(store: Store, run_id: str, against: str | None, out: Path) -> Path:
    """Write the report of a run (and of its comparison with `against`) to `out`."""
    html = report_html(build_report(store, run_id, against))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    return out

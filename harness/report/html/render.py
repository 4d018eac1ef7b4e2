"""HTML from the pages' data, through Jinja templates with autoescaping (every transcript text
is escaped), with the stylesheet and script inlined: a page needs no network and no other file.
The report file and the viewer render the same templates."""

from __future__ import annotations

import base64
import hashlib
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from harness.compare.money import usd
from harness.gate import GateResult
from harness.gate.html import gate_html
from harness.report.html.filters import EpisodeFilter
from harness.report.html.page import ReportPage
from harness.report.lines import difference_line, errors_line, mcnemar_line, verdict_line
from harness.report.paths import relative_paths
from harness.secrets import redact

HERE = Path(__file__).parent


def percent(value: float) -> str:
    return f"{value:.1%}"


def dollars(value: float) -> str:
    return usd(value) if value < 1 else f"${value:,.2f}"  # a small cost never shows as $0.0000


def seconds(value: float) -> str:
    if value < 120:
        return f"{value:.1f} s"
    minutes, rest = divmod(int(value), 60)
    return f"{minutes} min {rest:02d} s" if minutes < 120 else f"{minutes / 60:.1f} h"


def gate_rules(result: GateResult) -> Markup:
    """A gate's decision with every rule, its figures and verdict: the notebook's rendering
    (`harness.gate.html`, which escapes every value), so the two never differ."""
    return Markup(gate_html(result))  # gate_html escapes every value


@cache
def environment() -> Environment:
    """The templates, with autoescaping on for every one of them."""
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=StrictUndefined,
    )
    env.filters.update(percent=percent, dollars=dollars, seconds=seconds)
    env.tests["shown_by"] = lambda episode, flt: flt is None or flt.matches(episode)
    env.globals.update(
        verdict_line=verdict_line,
        difference_line=difference_line,
        mcnemar_line=mcnemar_line,
        errors_line=errors_line,
        gate_html=gate_rules,
        empty_filter=EpisodeFilter(),
        css=Markup((HERE / "static" / "report.css").read_text()),
        js=Markup((HERE / "static" / "report.js").read_text()),
    )
    return env


def script_hashes() -> list[str]:
    """The CSP sources (`'sha256-...'`) of the inline scripts the templates render: the one
    script, `report.js`, inlined whole in `base.html.j2`. The viewer allows only these, so a
    script that got into a page some other way does not run."""
    scripts = [str(environment().globals["js"])]
    return [
        "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"
        for text in scripts
    ]


def render(template: str, **context: Any) -> str:
    """A page: `mode` is `report` (a file: filters run in the browser) or `view` (the viewer:
    filters are asked of the server). Every secret still in the text is masked, and no
    absolute path of the user's machine is shown (`relative_paths`): the stored config holds
    the agent file's, and a report is shared."""
    return relative_paths(redact(environment().get_template(template).render(**context)))


def report_html(page: ReportPage, mode: str = "report", flt: EpisodeFilter | None = None) -> str:
    """A report page: the file `harness report` writes, or the viewer's page of a run."""
    return render("report.html.j2", page=page, title=page.title, mode=mode, flt=flt)

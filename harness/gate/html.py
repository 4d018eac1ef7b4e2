"""A gate's decision as HTML, for a notebook (`GateResult._repr_html_`): the decision, the runs,
each rule with its figures and verdict, the evidence played and the tasks that fail it."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.gate import GateResult

_VERDICTS = {"pass": "PASS", "fail": "FAIL", "undecided": "UNDECIDED"}
_COLOURS = {"pass": "#1a7f37", "fail": "#cf222e", "undecided": "#9a6700"}


def gate_html(result: GateResult) -> str:
    """A gate's decision as HTML, every value escaped: the decision, the runs and how they
    were chosen, each rule with its figures and verdict, the evidence played (or why none could
    be), and the tasks that fail it."""
    esc = html.escape
    against = f" against {result.baseline_run}" if result.baseline_run else " (no baseline)"
    blocks = " (blocks the candidate)" if result.blocks else ""
    parts = [
        f"<b>gate {esc(result.headline)}</b>{esc(blocks)}: "
        f"{esc(result.candidate_run)} ({esc(result.candidate_variant)}){esc(against)}"
    ]
    if result.notes:
        parts.append(_items(result.notes))
    rows = "".join(
        f"<tr><td>{esc(rule.rule)}</td>"
        f'<td style="color:{_COLOURS[rule.status]}"><b>{_VERDICTS[rule.status]}</b></td>'
        f"<td>{esc(rule.detail)}</td><td>{_p(rule.p_value)}</td><td>{_p(rule.adjusted_p)}</td>"
        "</tr>"
        for rule in result.rules
    )
    parts.append(
        "<table><thead><tr><th>rule</th><th>verdict</th><th>figures</th><th>p</th>"
        f"<th>adjusted p</th></tr></thead><tbody>{rows}</tbody></table>"
    )
    if result.evidence:
        played = "".join(
            f"<tr><td>{round_.round}</td><td>{esc(round_.candidate_run or '')}</td>"
            f"<td>{round_.candidate_episodes}</td><td>{esc(round_.baseline_run or '')}</td>"
            f"<td>{round_.baseline_episodes}</td><td>{esc(_why(round_.why))}</td></tr>"
            for round_ in result.evidence
        )
        parts.append(
            "<p>evidence played:</p><table><thead><tr><th>round</th><th>candidate run</th>"
            "<th>episodes</th><th>baseline run</th><th>episodes</th><th>why</th></tr></thead>"
            f"<tbody>{played}</tbody></table>"
        )
    else:
        parts.append("<p>evidence played: none</p>")
    if result.unplayed:
        parts.append(f"<p>evidence not played: {esc(result.unplayed)}</p>")
    if result.failing_tasks:
        failing = [f"{task}: {'; '.join(why)}" for task, why in result.failing_tasks.items()]
        parts.append("<p>failing tasks:</p>" + _items(failing))
    return "".join(parts)


def _items(lines: Sequence[str]) -> str:
    return "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>"


def _p(value: float | None) -> str:
    return "" if value is None else f"{value:.3g}"


def _why(why: dict[str, list[str]]) -> str:
    return "; ".join(f"{task}: {', '.join(reasons)}" for task, reasons in why.items())

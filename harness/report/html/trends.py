"""Trends over the whole results store: each variant's pass rate and cost per episode week by
week, and the gate's decisions over the last seven weeks, as charts and tables."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from pydantic import BaseModel, Field

from harness.compare import pass_rate
from harness.gate.evidence import is_evidence
from harness.gate.history import decision_status
from harness.report.html.charts import Chart, Frame, Line, Mark, color
from harness.store import Store

GATE_WEEKS = 7  # the gate chart shows this many weeks, ending with the newest decision's


def iso_week(day: date) -> str:
    year, week, _ = day.isocalendar()
    return f"{year}-W{week:02d}"


class WeekRate(BaseModel):
    """One variant's runs in one ISO week, pooled: the task as the unit of the interval."""

    variant: str = Field(description="Agent variant name.")
    week: str = Field(description="ISO week, e.g. 2026-W07.")
    runs: int = Field(description="Runs of the variant created that week.")
    tasks: int = Field(description="Distinct tasks graded.")
    passed: int = Field(description="Episodes that passed.")
    graded: int = Field(description="Episodes graded pass or fail.")
    rate: float = Field(description="Mean of the tasks' pass rates.")
    low: float = Field(description="Lower end of the 95% interval, clustered by task.")
    high: float = Field(description="Upper end of the 95% interval, clustered by task.")
    episodes: int = Field(description="Episodes played, errors included.")
    cost_per_episode: float = Field(
        description="Mean cost per episode in US dollars: agent, simulated user and judge."
    )


class GateDecision(BaseModel):
    """One decision of the gate, from the store's history."""

    at: str = Field(description="When it was decided (ISO 8601).")
    week: str = Field(description="Its ISO week.")
    candidate_run: str = Field(description="The run judged.")
    baseline_run: str | None = Field(description="The run it was compared with.")
    variant: str = Field(description="The candidate's variant.")
    passed: bool = Field(description="Whether the gate passed.")
    status: str = Field(
        default="pass",
        description="pass, fail, or undecided (no rule failed, one could not decide).",
    )
    pass_rate: float = Field(description="The candidate's pass rate.")
    reasons: list[str] = Field(
        description="Why it did not pass (the rules it broke or left undecided)."
    )


class Trends(BaseModel):
    """The trends section."""

    weeks: list[WeekRate] = Field(description="Per variant and week, by week then variant.")
    decisions: list[GateDecision] = Field(description="Gate decisions, oldest first.")
    gate_weeks: list[str] = Field(description="The seven weeks of the gate chart.")
    rate_chart: Chart = Field(description="Pass rate per variant and week with intervals.")
    cost_chart: Chart | None = Field(
        description="Cost per episode (agent, simulated user and judge) per variant and week; "
        "None when nothing cost."
    )
    gate_chart: Chart = Field(description="Gate decisions over the seven weeks.")


@dataclass
class _Pool:
    """The episodes of one variant's runs in one week, being added up."""

    runs: int = 0
    episodes: int = 0
    cost: float = 0.0
    outcomes: dict[str, list[bool]] = field(default_factory=lambda: defaultdict(list))


def week_rates(store: Store) -> list[WeekRate]:
    """Every stored run pooled by its variant and the week it was created."""
    pools: dict[tuple[str, str], _Pool] = defaultdict(_Pool)
    for info in store.runs():
        if is_evidence(info):
            continue  # a gate's extra trials of a few tasks: not a run of the suite
        pool = pools[(iso_week(datetime.fromisoformat(info.created_at).date()), info.variant)]
        pool.runs += 1
        for row in store.episode_rows(info.id):
            pool.episodes += 1
            pool.cost += row.spend.cost_usd  # agent, simulated user and judge
            if row.verdict is not None and row.verdict.outcome != "error":
                pool.outcomes[row.task_id].append(row.verdict.outcome == "pass")
    rates = []
    for (week, variant), pool in sorted(pools.items()):
        rate = pass_rate(pool.outcomes)
        rates.append(
            WeekRate(
                variant=variant,
                week=week,
                runs=pool.runs,
                tasks=rate.tasks,
                passed=rate.passed,
                graded=rate.n,
                rate=rate.rate,
                low=rate.low,
                high=rate.high,
                episodes=pool.episodes,
                cost_per_episode=pool.cost / pool.episodes if pool.episodes else 0.0,
            )
        )
    return rates


def gate_decisions(store: Store) -> list[GateDecision]:
    return [
        GateDecision(
            at=row["at"],
            week=iso_week(datetime.fromisoformat(row["at"]).date()),
            candidate_run=row["candidate_run"],
            baseline_run=row["baseline_run"],
            variant=row["variant"],
            passed=bool(row["passed"]),
            status=decision_status(row),
            pass_rate=row["pass_rate"],
            reasons=json.loads(row["reasons"]),
        )
        for row in store.gate_history()
    ]


def seven_weeks(decisions: list[GateDecision]) -> list[str]:
    """The gate chart's weeks: seven, ending with the newest decision's (or this week)."""
    newest = datetime.fromisoformat(decisions[-1].at).date() if decisions else date.today()
    return [iso_week(newest - timedelta(weeks=back)) for back in range(GATE_WEEKS - 1, -1, -1)]


def _percent(value: float) -> str:
    return f"{value:.0%}"


def _dollars(value: float) -> str:
    return f"${value:.2g}" if value else "$0"


def rate_and_cost_charts(weeks: list[WeekRate]) -> tuple[Chart, Chart | None]:
    """Pass rate (with intervals) and cost per episode, one line per variant, each variant
    shifted a little within its week so that intervals do not hide each other."""
    categories = sorted({w.week for w in weeks})
    index = {week: i for i, week in enumerate(categories)}
    variants = sorted({w.variant for w in weeks})
    frame = Frame(categories, 1.0)
    rate_chart = frame.chart(
        "Pass rate per variant and week (95% interval over tasks)", _percent, []
    )
    top = max((w.cost_per_episode for w in weeks), default=0.0) * 1.15
    cost_frame = Frame(categories, top)
    cost_chart = cost_frame.chart(
        "Cost per episode (agent, user simulator and judge), per variant and week", _dollars, []
    )
    for n, variant in enumerate(variants):
        mine = [w for w in weeks if w.variant == variant]
        shift = 0.4 * ((n + 0.5) / len(variants) - 0.5)
        rate_chart.lines.append(
            Line(
                name=variant,
                color=color(n),
                marks=[
                    Mark(
                        x=frame.x(index[w.week] + shift),
                        y=frame.y(w.rate),
                        low=frame.y(w.low),
                        high=frame.y(w.high),
                        title=f"{variant} {w.week}: {w.rate:.1%} (95% CI {w.low:.1%}-"
                        f"{w.high:.1%}), {w.passed}/{w.graded} over {w.tasks} tasks, "
                        f"{w.runs} run(s)",
                    )
                    for w in mine
                ],
            )
        )
        cost_chart.lines.append(
            Line(
                name=variant,
                color=color(n),
                marks=[
                    Mark(
                        x=cost_frame.x(index[w.week] + shift),
                        y=cost_frame.y(w.cost_per_episode),
                        title=f"{variant} {w.week}: ${w.cost_per_episode:.4g} per episode "
                        f"over {w.episodes} episodes",
                    )
                    for w in mine
                ],
            )
        )
    return rate_chart, cost_chart if top > 0 else None


def gate_chart(decisions: list[GateDecision], weeks: list[str]) -> Chart:
    """Each decision in its week at the candidate's pass rate, green when it passed; the weekly
    mean joined by a line; under each week, how many passed."""
    shown = [d for d in decisions if d.week in weeks]
    by_week: dict[str, list[GateDecision]] = defaultdict(list)
    for decision in shown:
        by_week[decision.week].append(decision)
    notes = [
        f"{sum(d.passed for d in by_week[w])} of {len(by_week[w])} pass" if by_week[w] else "-"
        for w in weeks
    ]
    frame = Frame(weeks, 1.0)
    chart = frame.chart("Gate decisions over the last seven weeks", _percent, notes)
    mean = Line(name="weekly mean pass rate", color="#6b7280")
    for i, week in enumerate(weeks):
        members = by_week[week]
        if not members:
            continue
        spread = frame.step * 0.5
        for j, d in enumerate(members):
            offset = spread * ((j + 0.5) / len(members) - 0.5)
            verdict = d.status
            why = f": {'; '.join(d.reasons)}" if d.reasons else ""
            chart.dots.append(
                Mark(
                    x=frame.x(i) + offset,
                    y=frame.y(d.pass_rate),
                    css=verdict,
                    title=f"{d.at} {d.variant} run {d.candidate_run}: gate {verdict} at "
                    f"{d.pass_rate:.1%}{why}",
                )
            )
        average = sum(d.pass_rate for d in members) / len(members)
        mean.marks.append(
            Mark(x=frame.x(i), y=frame.y(average), title=f"{week}: mean {average:.1%}")
        )
    chart.lines.append(mean)
    return chart


def trends(store: Store) -> Trends:
    weeks = week_rates(store)
    decisions = gate_decisions(store)
    rate_chart, cost_chart = rate_and_cost_charts(weeks)
    window = seven_weeks(decisions)
    return Trends(
        weeks=weeks,
        decisions=decisions,
        gate_weeks=window,
        rate_chart=rate_chart,
        cost_chart=cost_chart,
        gate_chart=gate_chart(decisions, window),
    )

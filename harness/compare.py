"""Variant B against variant A on the same tasks, personas and seeds, without being fooled by
noise: paired tests, intervals, pass^k, breakdowns, deltas, and the tasks that flipped."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import mean
from typing import Any

from harness.grading.relative import compare_pair
from harness.models import ChatModel
from harness.sim.suite import TaskCase
from harness.stats import (
    mcnemar_exact,
    paired_bootstrap,
    suite_pass_hat_k,
    wilson_interval,
    win_rate,
)
from harness.store import EpisodeRow, Store


@dataclass
class Side:
    """One variant's graded episodes, keyed by (task, trial)."""

    run_id: str
    variant: str
    rows: dict[tuple[str, int], EpisodeRow] = field(default_factory=dict)

    @classmethod
    def load(cls, store: Store, run_id: str) -> Side:
        info = store.run(run_id)
        if info is None:
            raise LookupError(f"no run {run_id!r} in {store.path}")
        rows = {(r.task_id, r.trial): r for r in store.episode_rows(run_id) if r.verdict}
        return cls(run_id, info.variant, rows)

    def outcome(self, key: tuple[str, int]) -> str:
        verdict = self.rows[key].verdict
        assert verdict is not None  # only graded episodes are loaded
        return verdict.outcome

    def passed(self, key: tuple[str, int]) -> bool:
        return self.outcome(key) == "pass"

    def outcomes(self, keys: Iterable[tuple[str, int]]) -> dict[str, list[bool]]:
        """Pass/fail per task over the given (task, trial) keys."""
        by_task: dict[str, list[bool]] = defaultdict(list)
        for key in sorted(keys):
            by_task[key[0]].append(self.passed(key))
        return dict(by_task)


def paired_keys(a: Side, b: Side) -> tuple[list[tuple[str, int]], set[tuple[str, int]]]:
    """The (task, trial) pairs both sides graded without error, and those left out."""
    shared = set(a.rows) & set(b.rows)
    errored = {k for k in shared if "error" in (a.outcome(k), b.outcome(k))}
    return sorted(shared - errored), errored


def _rate(outcomes: dict[str, list[bool]]) -> dict[str, Any]:
    flat = [o for trials in outcomes.values() for o in trials]
    low, high = wilson_interval(sum(flat), len(flat))
    return {
        "rate": sum(flat) / len(flat) if flat else 0.0,
        "passed": sum(flat),
        "n": len(flat),
        "low": low,
        "high": high,
    }


def compare_sides(a: Side, b: Side, cases: list[TaskCase]) -> dict[str, Any]:
    """The comparison of two graded runs over the (task, trial) pairs both graded without
    error. Pairs where either side errored are excluded and counted."""
    keys, errored = paired_keys(a, b)
    a_out, b_out = a.outcomes(keys), b.outcomes(keys)
    pairs_a = [a.passed(k) for k in keys]
    pairs_b = [b.passed(k) for k in keys]
    test = mcnemar_exact(pairs_a, pairs_b)
    worse = mcnemar_exact(pairs_a, pairs_b, alternative="less")
    difference = paired_bootstrap(a_out, b_out)
    trials = min((len(v) for v in a_out.values()), default=0)
    by_case = {case.task.id: case.task for case in cases}
    groups: dict[str, dict[str, list[tuple[str, int]]]] = {
        "level": defaultdict(list),
        "tag": defaultdict(list),
    }
    for key in keys:
        task = by_case.get(key[0])
        if task is not None:
            groups["level"][str(task.level)].append(key)
            for tag in task.tags:
                groups["tag"][tag].append(key)
    breakdowns = {
        name: {
            label: {"a": _rate(a.outcomes(members)), "b": _rate(b.outcomes(members))}
            for label, members in sorted(group.items())
        }
        for name, group in groups.items()
    }
    flips_down, flips_up = [], []
    for task_id in sorted(a_out):
        rate_a, rate_b = mean(a_out[task_id]), mean(b_out[task_id])
        if rate_a >= 0.5 > rate_b:
            flips_down.append(task_id)
        elif rate_b >= 0.5 > rate_a:
            flips_up.append(task_id)

    def spend(side: Side) -> dict[str, float]:
        rows = [side.rows[k] for k in keys]
        return {
            "cost_usd": mean(r.usage.cost_usd for r in rows) if rows else 0.0,
            "latency_s": mean(r.duration_s for r in rows) if rows else 0.0,
            "turns": mean(r.turns for r in rows) if rows else 0.0,
        }

    spend_a, spend_b = spend(a), spend(b)
    return {
        "a": {"run_id": a.run_id, "variant": a.variant, **_rate(a_out)},
        "b": {"run_id": b.run_id, "variant": b.variant, **_rate(b_out)},
        "pairs": len(keys),
        "excluded_errors": len(errored),
        "difference": {
            "estimate": difference.difference,
            "low": difference.low,
            "high": difference.high,
            "bootstrap_p": difference.p_value,
        },
        "mcnemar": {
            "b_only": test.b_only,
            "a_only": test.a_only,
            "p_value": test.p_value,
            "p_b_worse": worse.p_value,
        },
        "pass_hat_k": {
            "k": trials,
            "a": suite_pass_hat_k(a_out, trials) if trials else 0.0,
            "b": suite_pass_hat_k(b_out, trials) if trials else 0.0,
        },
        "breakdowns": breakdowns,
        "deltas": {name: spend_b[name] - spend_a[name] for name in spend_a},
        "spend": {"a": spend_a, "b": spend_b},
        "flipped_to_fail": flips_down,
        "flipped_to_pass": flips_up,
    }


async def judge_pairs(
    store: Store, a: Side, b: Side, cases: list[TaskCase], judge: ChatModel
) -> dict[str, Any]:
    """The relative judge over every (task, trial) both sides played: win rate of B over A."""
    tasks = {case.task.id: case.task for case in cases}
    a_transcripts = {(t.task_id, t.trial): t for t, _, _ in store.transcripts(a.run_id)}
    wins = losses = ties = failures = 0
    for transcript, _, _ in store.transcripts(b.run_id):
        key = (transcript.task_id, transcript.trial)
        if key not in a_transcripts or transcript.task_id not in tasks:
            continue
        verdict = await compare_pair(
            tasks[transcript.task_id], a_transcripts[key], transcript, judge
        )
        if verdict.winner is None:
            failures += 1
        else:
            wins += verdict.winner == "b"
            losses += verdict.winner == "a"
            ties += verdict.winner == "tie"
    rate = win_rate(wins, losses, ties)
    return {
        "b_wins": wins,
        "a_wins": losses,
        "ties": ties,
        "judge_errors": failures,
        "win_rate": rate.estimate,
        "low": rate.low,
        "high": rate.high,
    }

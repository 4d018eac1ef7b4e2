"""Every candidate of a climb, where it came from and how it did, written to the results store
as the search goes: a GEPA callback tells the parent a proposal was made from and whether GEPA
kept it; each evaluation is stored with the run it played."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from harness.climb.adapter import Evaluation
from harness.climb.candidates import InvalidCandidate, candidate_id, changes
from harness.specs.climb import Climb
from harness.store import EvaluationInfo, Store
from harness.store.rows import now

Progress = Callable[[str], None]


def diff(parent: dict[str, str], candidate: dict[str, str]) -> str:
    """A unified diff, component by component, of a candidate's text against its parent's."""
    lines: list[str] = []
    for component in sorted(set(parent) | set(candidate)):
        old, new = parent.get(component, ""), candidate.get(component, "")
        if old != new:
            lines += difflib.unified_diff(
                old.splitlines(),
                new.splitlines(),
                f"parent/{component}",
                f"candidate/{component}",
                lineterm="",
            )
    return "\n".join(lines)


class ClimbRecorder:
    """Writes a climb's candidates and evaluations to the store (as GEPA's callback and the
    adapter's evaluation hook); the store is the climb's, closed with it."""

    def __init__(
        self,
        store: Store,
        climb_id: str,
        config: Climb,
        seed: dict[str, str],
        production: str,
        progress: Progress,
        spent: Callable[[], float],
        train_size: int,
    ):
        self.climb_id, self.config, self.seed = climb_id, config, seed
        self.progress, self.spent, self.train_size = progress, spent, train_size
        self.store = store
        self.store.start_climb(climb_id, config.name, production, config.model_dump(mode="json"))
        self.parent: tuple[str, dict[str, str]] = ("production", seed)
        self.proposed: str | None = None  # the newest candidate of this iteration
        self.best_mean: dict[str, float] = {}
        self.episodes = 0
        self.iterations = 0  # GEPA's proposal iterations, resumed ones included

    # GEPA's callbacks (gepa.core.callbacks.GEPACallback; each is optional)

    def on_iteration_start(self, event: dict[str, Any]) -> None:
        self.proposed = None

    def on_optimization_end(self, event: dict[str, Any]) -> None:
        self.iterations = event["total_iterations"] + 1  # GEPA counts from -1 (gepa 0.1.4)

    def on_candidate_selected(self, event: dict[str, Any]) -> None:
        texts = event["candidate"]
        self.parent = (self.ident(texts), dict(texts))

    def on_candidate_accepted(self, event: dict[str, Any]) -> None:
        if self.proposed:
            note = "better on its minibatch; kept in GEPA's pool"
            self.store.set_candidate_status(self.climb_id, self.proposed, "kept", note)

    def on_candidate_rejected(self, event: dict[str, Any]) -> None:
        if self.proposed:
            parent = self.parent[0]
            note = (
                f"not better than its parent {parent} on a minibatch (GEPA compares the sums "
                f"of the tasks' mean scores): {event['reason']}"
            )
            self.store.set_candidate_status(self.climb_id, self.proposed, "rejected", note)

    # The adapter's hook

    def evaluated(
        self,
        evaluation: Evaluation,
        changed: dict[str, Any],
        texts: dict[str, str] | None,
        purpose: str,
    ) -> None:
        """Store an evaluation (and, the first time, its candidate) and say how it went."""
        ident = evaluation.candidate
        if texts is not None:
            parent_id, parent_texts = self.parent
            is_new = ident != parent_id and ident != "production"
            self.store.add_candidate(
                self.climb_id,
                ident,
                parent_id if is_new else None,
                changed,
                diff(parent_texts, texts) if is_new else "",
                "proposed" if ident != "production" else "production",
            )
            if is_new:
                self.proposed = ident
        at = now()
        info = EvaluationInfo(
            ident,
            purpose,
            evaluation.run_id,
            evaluation.scores,
            evaluation.cost_usd,
            evaluation.episodes,
            at,
        )
        self.store.add_climb_evaluation(self.climb_id, info)
        if purpose == "search":
            self.episodes += evaluation.episodes
        if purpose == "search" and len(info.scores) == self.train_size:  # GEPA's own measure
            self.best_mean[ident] = max(self.best_mean.get(ident, 0.0), info.mean)
        self.progress(self.line(evaluation, info, purpose))

    def line(self, evaluation: Evaluation, info: EvaluationInfo, purpose: str) -> str:
        """The progress line of an evaluation, every figure named: its pass rate (what the gate
        decides on) and mean score (what GEPA compares: a fail counts its check score), which
        differ whenever a task fails with some checks passing."""
        figures = (
            f"pass rate {evaluation.pass_rate:.0%}, mean score {info.mean:.0%} on "
            f"{len(info.scores)} {'held-out ' if purpose == 'acceptance' else ''}tasks "
            f"(run {evaluation.run_id})"
        )
        line = f"candidate {evaluation.candidate} ({purpose}): {figures}"
        if purpose == "acceptance":  # the search's figures are settled by now
            return f"{line}; ${self.spent():.4f} spent"
        best = max(self.best_mean.items(), key=lambda kv: kv[1], default=("none", 0.0))
        return (
            f"{line}; best mean score on the train set: {best[0]} {best[1]:.0%}; "
            f"{self.episodes} episodes, ${self.spent():.4f} spent"
        )

    def invalid(self, texts: dict[str, str], reason: str) -> None:
        """A proposal the variant cannot take is kept too, with why (it scores 0)."""
        ident = self.ident(texts)
        parent_id, parent_texts = self.parent
        difference = diff(parent_texts, texts)
        self.store.add_candidate(self.climb_id, ident, parent_id, {}, difference, "invalid", reason)
        self.progress(f"candidate {ident}: not playable ({reason})")

    def ident(self, texts: dict[str, str]) -> str:
        try:
            return candidate_id(changes(texts, self.seed, self.config.components))
        except InvalidCandidate:
            return "invalid-" + candidate_id({"texts": texts})[:8]

"""The harness behind GEPA's `GEPAAdapter` protocol: a candidate is played as ordinary harness
episodes (played and graded by the engine on the climb's one event loop, stored like any run),
and its failing transcripts become the feedback the reflection model reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from harness.climb.candidates import CandidateVariants, InvalidCandidate, candidate_id, changes
from harness.climb.session import ClimbSession, Played
from harness.grading.result import Verdict
from harness.sim.suite import TaskCase
from harness.sim.taskset import TaskSet
from harness.specs.climb import Climb
from harness.transcript import Transcript


@dataclass
class Episode:
    """One task as a candidate played it: what GEPA's reflection reads."""

    task_id: str
    transcript: Transcript | None
    verdict: Verdict | None
    error: str = ""


@dataclass
class Evaluation:
    """One evaluation of a candidate on some tasks (a stored run): per task, its score (what
    GEPA compares: a pass 1, a fail its weighted check score, an error 0, averaged over trials)
    and its pass rate (the share of its trials that passed, what the gate decides on)."""

    candidate: str
    run_id: str | None
    scores: dict[str, float]
    cost_usd: float
    episodes: int
    passes: dict[str, float] = field(default_factory=dict)

    @property
    def pass_rate(self) -> float:
        """The mean of the per-task pass rates, as a run's pass rate is reckoned."""
        return sum(self.passes.values()) / len(self.passes) if self.passes else 0.0


@dataclass
class ClimbContext:
    """What the adapter needs of the climb, loaded once: its config and files, the tasks, the
    candidates as variants, and the session every evaluation runs in."""

    config: Climb
    base: Path
    production_file: Path
    seed: dict[str, str]
    suite: TaskSet  # every task of the climb (train and held out)
    variants: CandidateVariants
    lineage: list[str]  # production's name and the names it extends
    session: ClimbSession
    recorder: Recorder | None = None

    def cases(self, task_ids: Sequence[str]) -> list[TaskCase]:
        """The tasks of these ids, as the suite lists them."""
        wanted = set(task_ids)
        return [case for case in self.suite.cases if case.task.id in wanted]


class Recorder(Protocol):
    """Told of every evaluation (and every proposal that could not be played)."""

    def evaluated(
        self,
        evaluation: Evaluation,
        changed: dict[str, Any],
        texts: dict[str, str] | None,
        purpose: str,
    ) -> None: ...

    def invalid(self, texts: dict[str, str], reason: str) -> None: ...


@dataclass
class HarnessAdapter:
    """`evaluate` and `make_reflective_dataset` for GEPA (duck-typed to its protocol)."""

    ctx: ClimbContext
    # None: GEPA's own reflective proposer writes the texts (an attribute of its protocol)
    propose_new_texts: Any = field(default=None, init=False, repr=False, compare=False)
    spent_usd: float = 0.0
    episodes_played: int = 0
    seconds: dict[str, float] = field(default_factory=dict)  # wall time playing, grading

    def evaluate(
        self, batch: list[str], candidate: dict[str, str], capture_traces: bool = False
    ) -> Any:
        from gepa import EvaluationBatch

        try:
            changed = changes(candidate, self.ctx.seed, self.ctx.config.components)
        except InvalidCandidate as exc:
            if self.ctx.recorder is not None:
                self.ctx.recorder.invalid(candidate, str(exc))
            episodes = [Episode(task, None, None, str(exc)) for task in batch]
            return EvaluationBatch(
                outputs=episodes, scores=[0.0] * len(batch), trajectories=episodes
            )
        evaluation, episodes = self.play(changed, batch, texts=candidate)
        scores = [evaluation.scores.get(task, 0.0) for task in batch]
        return EvaluationBatch(
            outputs=episodes, scores=scores, trajectories=episodes if capture_traces else None
        )

    def play(
        self,
        changed: dict[str, Any],
        task_ids: list[str],
        first_trial: int = 0,
        texts: dict[str, str] | None = None,
        purpose: str = "search",
    ) -> tuple[Evaluation, list[Episode]]:
        """Play a candidate (its changes to production; `texts`, GEPA's view of it) on tasks,
        as a stored run."""
        ctx, trials = self.ctx, self.ctx.config.trials
        ident = candidate_id(changed)
        variant = ctx.variants.variant(ident, changed).spec
        cases = ctx.cases(task_ids)
        config = {
            "agent": str(ctx.production_file),
            "candidate": ident,
            "overrides": list(ctx.config.overrides),
            "trials": trials,
            "first_trial": first_trial,
            "variant": variant.model_dump(mode="json"),
            "tasks": {**ctx.suite.source, "ids": [case.task.id for case in cases]},
            "suite": {case.task.id: ctx.suite.task_hashes[case.task.id] for case in cases},
            "lineage": [variant.name, *ctx.lineage],
        }
        played = ctx.session.run(ctx.session.evaluate(variant, cases, config, trials, first_trial))
        for kind, seconds in played.seconds.items():
            self.seconds[kind] = self.seconds.get(kind, 0.0) + seconds
        episodes, scores, cost = scored(played, task_ids)
        self.spent_usd += cost
        self.episodes_played += len(task_ids) * trials
        evaluation = Evaluation(
            ident, played.run_id, scores, cost, len(task_ids) * trials, pass_rates(played, task_ids)
        )
        if ctx.recorder is not None:
            ctx.recorder.evaluated(evaluation, changed, texts, purpose)
        return evaluation, episodes

    def make_reflective_dataset(
        self, candidate: dict[str, str], eval_batch: Any, components_to_update: list[str]
    ) -> Mapping[str, Sequence[Mapping[str, Any]]]:
        """For each component: the episodes as reflection reads them, failures first."""
        episodes = sorted(
            eval_batch.trajectories or [], key=lambda e: _score(e.verdict) if e.verdict else -1
        )
        records = [feedback(episode) for episode in episodes]
        return {component: records for component in components_to_update}


def scored(played: Played, task_ids: list[str]) -> tuple[list[Episode], dict[str, float], float]:
    """Per task: the mean verdict score over trials (an error scores 0), and the episode with
    the lowest score for reflection; and what the episodes cost."""
    if played.run_id is None:
        reason = played.failure or "the evaluation produced no run"
        return [Episode(t, None, None, reason) for t in task_ids], {}, 0.0
    by_task: dict[str, list[tuple[Transcript, Verdict | None]]] = {}
    for transcript, verdict in played.episodes:  # by task and trial
        by_task.setdefault(transcript.task_id, []).append((transcript, verdict))
    scores, episodes, cost = {}, [], 0.0
    for task_id in task_ids:
        trials = by_task.get(task_id, [])
        cost += sum(t.usage.cost_usd + t.user_usage.cost_usd for t, _ in trials)
        values = [_score(verdict) for _, verdict in trials]
        scores[task_id] = sum(values) / len(values) if values else 0.0
        worst = min(trials, key=lambda episode: _score(episode[1]), default=(None, None))
        episodes.append(Episode(task_id, *worst))
    return episodes, scores, cost


def pass_rates(played: Played, task_ids: list[str]) -> dict[str, float]:
    """Per task, the share of its played trials that passed ({} when the evaluation produced
    no run; a task without an episode, 0)."""
    if played.run_id is None:
        return {}
    outcomes: dict[str, list[bool]] = {task_id: [] for task_id in task_ids}
    for transcript, verdict in played.episodes:
        if transcript.task_id in outcomes:
            outcomes[transcript.task_id].append(verdict is not None and verdict.outcome == "pass")
    return {t: sum(found) / len(found) if found else 0.0 for t, found in outcomes.items()}


def _score(verdict: Verdict | None) -> float:
    """A verdict as a number GEPA can sum: pass 1, fail its weighted score, error 0."""
    if verdict is None or verdict.outcome == "error":
        return 0.0
    return 1.0 if verdict.outcome == "pass" else min(verdict.score, 0.99)


def feedback(episode: Episode) -> dict[str, Any]:
    """One episode for the reflection model: the conversation, what failed and why."""
    record: dict[str, Any] = {"Task": episode.task_id}
    if episode.transcript is None:
        record["Feedback"] = f"The episode could not be played: {episode.error}"
        return record
    t = episode.transcript
    record["Conversation"] = "\n".join(_line(m) for m in t.messages)
    lines = [f"End reason: {t.end_reason.value}"]
    if t.error is not None:
        lines.append(f"Error ({t.error.side.value}): {t.error.message}")
    verdict = episode.verdict
    if verdict is None:
        lines.append("Not graded.")
    else:
        lines.append(f"Verdict: {verdict.outcome} (score {verdict.score:.2f})")
        lines += [
            f"Failed check '{c.name}' ({c.kind}): {c.reason}" if c.outcome == "fail"
            else f"Check '{c.name}' could not decide ({c.error_side}): {c.reason}"
            for c in verdict.checks
            if c.outcome != "pass"
        ]  # fmt: skip
    errors = [m for m in t.messages if m.role == "tool" and m.is_error]
    lines += [f"Tool error from {m.name}: {m.content}" for m in errors]
    record["Feedback"] = "\n".join(lines)
    return record


def _line(message: Any) -> str:
    calls = ", ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
    text = message.content + (f" [calls {calls}]" if calls else "")
    return f"{message.role}: {text}"

"""The harness behind GEPA's `GEPAAdapter` protocol: a candidate is played as ordinary harness
episodes (simulate + grade through the pipeline, stored like any run), and its failing
transcripts become the feedback the reflection model reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from harness.climb.candidates import InvalidCandidate, candidate_id, changes, variant_yaml
from harness.grading.result import Verdict
from harness.pipeline.runner import RunOptions, run_pipeline
from harness.pipeline.types import Graded
from harness.specs.climb import Climb
from harness.store import Store
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
    """One evaluation of a candidate on some tasks (a stored run)."""

    candidate: str
    run_id: str | None
    scores: dict[str, float]
    cost_usd: float
    episodes: int


@dataclass
class ClimbContext:
    """What the adapter needs of the climb: its config, files and run options."""

    config: Climb
    base: Path
    production_file: Path
    seed: dict[str, str]
    workdir: Path
    options: RunOptions
    recorder: Recorder | None = None


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
    propose_new_texts: ClassVar[Any] = None  # GEPA's own reflective proposer writes the texts
    spent_usd: float = 0.0
    episodes_played: int = 0
    seconds: dict[str, float] = field(default_factory=dict)  # wall time per node kind

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
        ident = candidate_id(changed)
        variant = self.variant_file(ident, changed)
        data = self.dag(variant, task_ids, first_trial)
        outcome = run_pipeline(data, {}, Path(f"climb {self.ctx.config.name}"), self.ctx.options)
        graded = outcome.execution.outputs.get("grade")
        run_id = graded.run_id if isinstance(graded, Graded) else None
        failure = next((s.error for s in outcome.execution.statuses.values() if s.error), "")
        for status in outcome.execution.statuses.values():
            self.seconds[status.kind] = self.seconds.get(status.kind, 0.0) + status.seconds
        episodes, scores, cost = self.read_run(run_id, task_ids, failure)
        self.spent_usd += cost
        self.episodes_played += len(task_ids) * self.ctx.config.trials
        evaluation = Evaluation(ident, run_id, scores, cost, len(task_ids) * self.ctx.config.trials)
        if self.ctx.recorder is not None:
            self.ctx.recorder.evaluated(evaluation, changed, texts, purpose)
        return evaluation, episodes

    def variant_file(self, ident: str, changed: dict[str, Any]) -> Path:
        path = self.ctx.workdir / "candidates" / f"{ident}.yaml"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            name = f"{self.ctx.config.name}-{ident}"
            path.write_text(
                variant_yaml(name, self.ctx.production_file, changed, "A climb candidate.")
            )
        return path

    def dag(self, variant: Path, task_ids: list[str], first_trial: int) -> dict[str, Any]:
        config = self.ctx.config
        tasks = {"paths": [str(self.ctx.base / p) for p in config.tasks.paths], "ids": task_ids}
        if config.tasks.personas:
            tasks["personas"] = str(self.ctx.base / config.tasks.personas)
        simulate = {"agent": str(variant), "set": config.overrides, "trials": config.trials}
        if first_trial:
            simulate["first_trial"] = first_trial
        grade = {}  # without a judge of its own, the climb grades with the project's
        if config.judge_model is not None:
            grade["judge_model"] = config.judge_model.model_dump(exclude_none=True)
        return {
            "kind": "dag",
            "name": f"climb-{config.name}",
            "nodes": {
                "tasks": {"uses": "load_tasks", "with": tasks},
                "simulate": {"uses": "simulate", "needs": ["tasks"], "with": simulate},
                "grade": {"uses": "grade", "needs": ["simulate"], "with": grade},
            },
        }

    def read_run(
        self, run_id: str | None, task_ids: list[str], failure: str
    ) -> tuple[list[Episode], dict[str, float], float]:
        """Per task: the mean verdict score over trials (an error scores 0), and the episode
        with the lowest score for reflection."""
        if run_id is None:
            reason = failure or "the evaluation pipeline produced no run"
            return [Episode(t, None, None, reason) for t in task_ids], {}, 0.0
        store = Store(self.ctx.options.store)
        try:
            rows = list(store.episode_rows(run_id))
            transcripts = {(t.task_id, t.trial): t for t, _, _ in store.transcripts(run_id)}
        finally:
            store.close()
        by_task: dict[str, list[Any]] = {}
        for row in rows:
            by_task.setdefault(row.task_id, []).append(row)
        scores, episodes, cost = {}, [], 0.0
        for task_id in task_ids:
            played = by_task.get(task_id, [])
            cost += sum(r.usage.cost_usd + r.user_usage.cost_usd for r in played)
            values = [_score(r.verdict) for r in played]
            scores[task_id] = sum(values) / len(values) if values else 0.0
            worst = min(played, key=lambda r: _score(r.verdict), default=None)
            transcript = transcripts.get((task_id, worst.trial)) if worst else None
            episodes.append(Episode(task_id, transcript, worst.verdict if worst else None))
        return episodes, scores, cost

    def make_reflective_dataset(
        self, candidate: dict[str, str], eval_batch: Any, components_to_update: list[str]
    ) -> Mapping[str, Sequence[Mapping[str, Any]]]:
        """For each component: the episodes as reflection reads them, failures first."""
        episodes = sorted(
            eval_batch.trajectories or [], key=lambda e: _score(e.verdict) if e.verdict else -1
        )
        records = [feedback(episode) for episode in episodes]
        return {component: records for component in components_to_update}


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

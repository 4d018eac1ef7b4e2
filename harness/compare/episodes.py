"""One stored run's graded episodes keyed by (task, trial): what comparisons and the gate read,
with the episodes that lack evidence (an error verdict, or none) kept apart."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from harness.grading.result import Verdict as GradedVerdict
from harness.store import EpisodeRow, Store
from harness.transcript import EndReason, Side, Usage

Key = tuple[str, int]  # (task id, trial)


@dataclass
class GradedEpisodes:
    """One stored run's graded episodes, keyed by (task, trial): what comparisons and the gate
    read, loaded once."""

    run_id: str
    variant: str
    rows: dict[Key, EpisodeRow] = field(default_factory=dict)
    ungraded: list[Key] = field(default_factory=list)  # stored episodes without a verdict

    @classmethod
    def load(cls, store: Store, run_id: str) -> GradedEpisodes:
        info = store.run(run_id)
        if info is None:
            raise LookupError(f"no run {run_id!r} in {store.path}")
        rows, ungraded = {}, []
        for row in store.episode_rows(run_id):
            if row.verdict is None:
                ungraded.append((row.task_id, row.trial))
            else:
                rows[(row.task_id, row.trial)] = row
        return cls(run_id, info.variant, rows, ungraded)

    @classmethod
    def from_outcomes(
        cls,
        run_id: str,
        variant: str,
        outcomes: Mapping[str, Sequence[bool | None] | Mapping[int, bool | None]],
    ) -> GradedEpisodes:
        """Graded episodes from outcomes per task, by trial (a list from trial 0, or a mapping
        of trial numbers; True pass, False fail, None an episode without evidence: an error
        verdict of the judge), without a store: for simulations of the decision rules and
        results gathered elsewhere. An agent's own crash is its failure (False), never missing
        evidence."""
        rows = {}
        for task, trials in outcomes.items():
            numbered = trials.items() if isinstance(trials, Mapping) else enumerate(trials)
            for trial, outcome in numbered:
                verdict = GradedVerdict(
                    task_id=task,
                    trial=trial,
                    outcome="error" if outcome is None else ("pass" if outcome else "fail"),
                    error_side=Side.JUDGE if outcome is None else None,
                )
                end = EndReason.ERROR if outcome is None else EndReason.USER_STOP
                rows[(task, trial)] = EpisodeRow(
                    task, trial, end, 1, Usage(), Usage(), 0.0, verdict
                )
        return cls(run_id, variant, rows)

    def filled(self, replays: Sequence[GradedEpisodes]) -> GradedEpisodes:
        """This run with more episodes of its variant (the gate's evidence runs, in the order
        they were played): each (task, trial) holds the first episode with evidence among this
        run's and the replays', so that an episode re-played after an error fills its slot,
        and trials the replays added join the run's."""
        merged = GradedEpisodes(self.run_id, self.variant, dict(self.rows), list(self.ungraded))
        for replay in replays:
            known = merged.keys()
            for key in sorted(replay.keys()):
                if key in known and not merged.missing(key):
                    continue  # the first evidence counts
                if key in replay.rows and (key not in known or not replay.missing(key)):
                    merged.rows[key] = replay.rows[key]
                    merged.ungraded = [k for k in merged.ungraded if k != key]
                elif key not in known:
                    merged.ungraded.append(key)
        return merged

    def trials(self) -> dict[str, list[int]]:
        """The trial numbers stored per task, graded or not."""
        by_task: dict[str, list[int]] = defaultdict(list)
        for task, trial in sorted(self.keys()):
            by_task[task].append(trial)
        return dict(by_task)

    def only_tasks(self, task_ids: set[str]) -> GradedEpisodes:
        """The same run restricted to some tasks (the tasks two suites share)."""
        rows = {key: row for key, row in self.rows.items() if key[0] in task_ids}
        ungraded = [key for key in self.ungraded if key[0] in task_ids]
        return GradedEpisodes(self.run_id, self.variant, rows, ungraded)

    def outcome(self, key: Key) -> str:
        verdict = self.rows[key].verdict
        assert verdict is not None  # only graded episodes are loaded
        return verdict.outcome

    def passed(self, key: Key) -> bool:
        return self.outcome(key) == "pass"

    def outcomes(self, keys: Iterable[Key]) -> dict[str, list[bool]]:
        """Pass/fail per task over the given (task, trial) keys."""
        by_task: dict[str, list[bool]] = defaultdict(list)
        for key in sorted(keys):
            by_task[key[0]].append(self.passed(key))
        return dict(by_task)

    def keys(self) -> set[Key]:
        """Every stored episode's (task, trial), graded or not."""
        return {*self.rows, *self.ungraded}

    def missing(self, key: Key) -> bool:
        """No evidence for this episode: an error verdict, or no verdict at all."""
        return key not in self.rows or self.outcome(key) == "error"

    def imputed(self, keys: Iterable[Key], errors_pass: bool) -> dict[str, list[bool]]:
        """Pass/fail per task over the keys, each episode without evidence counted as a pass
        (`errors_pass`) or as a fail: the two ends between which the hidden outcomes lie."""
        by_task: dict[str, list[bool]] = defaultdict(list)
        for key in sorted(keys):
            by_task[key[0]].append(errors_pass if self.missing(key) else self.passed(key))
        return dict(by_task)

    def graded_outcomes(self) -> dict[str, list[bool]]:
        """Pass/fail per task over every episode with evidence."""
        return self.outcomes(key for key in self.rows if self.outcome(key) != "error")

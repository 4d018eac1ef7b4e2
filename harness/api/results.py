"""What an evaluation gives back: typed results that show themselves in a notebook and reach
everything a command prints (the figures of `run-eval`'s summary, each episode's transcript and
verdict)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING, Any

from harness.report.summary import RunFigures, interval_text, run_figures
from harness.stats.rates import RunRate
from harness.store import Store
from harness.store_location import StoreTarget

if TYPE_CHECKING:
    from harness.grading.result import Verdict
    from harness.transcript import Transcript


@dataclass(frozen=True)
class Episode:
    """One played episode: its transcript and its newest verdict."""

    task_id: str
    trial: int
    transcript: Transcript
    verdict: Verdict | None

    @property
    def outcome(self) -> str:
        return self.verdict.outcome if self.verdict is not None else "ungraded"


@dataclass(frozen=True)
class RunResult:
    """A stored run and its figures (`harness.report.summary.RunFigures`, as every printer
    reads them): its pass rate with the task-clustered interval, per task lines, usage."""

    store: StoreTarget
    figures: RunFigures

    @classmethod
    def load(
        cls, run_id: str, store: StoreTarget, levels: dict[str, int] | None = None
    ) -> RunResult:
        """A run of a results store (a path, `sqlite:///...` or `postgresql://...`)."""
        opened = Store(store)
        try:
            return cls(store, run_figures(opened, run_id, levels))
        finally:
            opened.close()

    @property
    def run_id(self) -> str:
        return self.figures.run_id

    @property
    def variant(self) -> str:
        return self.figures.variant

    @property
    def pass_rate(self) -> float:
        """The mean of the per-task pass rates (errors excluded)."""
        return self.figures.rate

    @property
    def interval(self) -> RunRate:
        """The pass rate's 95% interval, clustered by task (`.low`, `.high`, `.method`)."""
        return self.figures.pass_rate

    @property
    def episodes(self) -> list[Episode]:
        """Every episode with its transcript and newest verdict, by task and trial."""
        return list(self.iter_episodes())

    def iter_episodes(self) -> Iterator[Episode]:
        store = Store(self.store)
        try:
            verdicts = {(v.task_id, v.trial): v for v in store.latest_verdicts(self.run_id)}
            for transcript, _, _ in store.transcripts(self.run_id):
                key = (transcript.task_id, transcript.trial)
                yield Episode(key[0], key[1], transcript, verdicts.get(key))
        finally:
            store.close()

    def rows(self) -> list[dict[str, Any]]:
        """One row per task: level, trials, passes, fails, errors, failed checks."""
        return [
            {
                "task_id": line.task_id,
                "level": line.level,
                "trials": line.trials,
                "passed": line.passed,
                "failed": line.failed,
                "errors": line.errors,
                "failed_checks": list(line.failed_checks),
            }
            for line in self.figures.tasks
        ]

    def to_pandas(self) -> Any:
        """The per-task rows as a pandas DataFrame (`pip install pandas`)."""
        try:
            import pandas
        except ImportError:
            raise ImportError("to_pandas needs pandas: pip install pandas") from None
        return pandas.DataFrame(self.rows())

    def __str__(self) -> str:
        figures = self.figures
        return (
            f"run {self.run_id} ({self.variant}): pass rate {figures.rate:.1%} "
            f"({figures.passed}/{figures.graded} episodes, {interval_text(figures.pass_rate)})"
        )

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{escape(r['task_id'])}</td><td>{r['level'] or ''}</td>"
            f"<td>{r['passed']}/{r['trials']}</td><td>{r['errors']}</td>"
            f"<td>{escape(', '.join(r['failed_checks']))}</td></tr>"
            for r in self.rows()
        )
        head = "<tr><th>task</th><th>level</th><th>passed</th><th>errors</th><th>failed</th></tr>"
        return f"<p><b>{escape(str(self))}</b></p><table>{head}{rows}</table>"

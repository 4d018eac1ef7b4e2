"""Evidence before a decision: what the gate plays before it decides, and the loop that plays it.

A rule that cannot decide asks for evidence, on just the tasks that need it:
- top-up: a task one side played fewer trials of than the other gets the trial numbers it lacks,
  so that both sides hold the same trials (none is ever dropped);
- replay: where the episodes without evidence (an error verdict: the judge, a checker, the
  environment, the user simulator, a model provider, the harness; or no verdict) could change
  the decision (`errors_matter`), they are played again under the same trial numbers and seeds,
  in up to `REPLAYS` rounds;
- regression: a regression-tagged task that declined (missing evidence counted against the
  candidate), or that the candidate passed no trial of while there are too few trials to show a
  break, gets more trials on both sides, up to the gate's `max_trials`.

The gate then decides once, on everything (`evaluate_gate`): no rule is tested before the
evidence is in, so the extra trials are one look, not several. Every declined regression task is
played to the budget, whether or not it already looks significant, so that its test is the
fixed-size test at `max_trials` whatever the first trials showed; a task that did not decline
cannot fail. `bench/gate_power.py` runs this loop, re-trials included,
on the gate's own code and measures both error rates.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from harness.compare import GradedEpisodes
from harness.gate.family import family, readings, status, tagged
from harness.gate.figures import EvidenceRound
from harness.specs.gate import Gate
from harness.stats import fewest_for_fisher
from harness.store import PlayedTask, RunInfo, Store

REPLAYS = 2  # rounds in which an episode without evidence is played again
ROUNDS = 3  # rounds of evidence at most (a replay that failed again, a task that declined)


@dataclass
class Plan:
    """The episodes one round plays, per side (task -> trial numbers), and why each task is
    played (top-up, replay, regression)."""

    candidate: dict[str, list[int]] = field(default_factory=dict)
    baseline: dict[str, list[int]] = field(default_factory=dict)
    why: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    def __bool__(self) -> bool:
        return bool(self.candidate or self.baseline)

    def add(self, side: dict[str, list[int]], task: str, trials: Sequence[int], why: str) -> None:
        if trials:
            side[task] = sorted({*side.get(task, []), *trials})
            self.why[task].add(why)

    def episodes(self, side: dict[str, list[int]]) -> int:
        return sum(len(trials) for trials in side.values())

    def describe(self) -> str:
        """The plan in one line: how many episodes a side, and which tasks for what."""
        kinds: dict[str, list[str]] = defaultdict(list)
        for task in sorted(self.why):
            for why in sorted(self.why[task]):
                kinds[why].append(task)
        shown = "; ".join(f"{why}: {', '.join(tasks)}" for why, tasks in sorted(kinds.items()))
        return (
            f"{self.episodes(self.candidate)} candidate and {self.episodes(self.baseline)} "
            f"baseline episodes ({shown})"
        )


def plan(
    config: Gate,
    candidate: GradedEpisodes,
    baseline: GradedEpisodes,
    cases: Sequence[PlayedTask],
    round_: int,
) -> Plan:
    """What round `round_` (from 1) must play before the gate can decide, on the tasks both
    sides played."""
    wanted = Plan()
    mine, theirs = candidate.trials(), baseline.trials()
    regression = tagged(config, cases)
    replay = round_ <= REPLAYS and errors_matter(config, candidate, baseline, cases)
    few = fewest_for_fisher(config.alpha)
    for task in sorted(mine.keys() & theirs.keys()):
        union = sorted({*mine[task], *theirs[task]})
        sides = ((candidate, mine, wanted.candidate), (baseline, theirs, wanted.baseline))
        for side, have, out in sides:
            wanted.add(out, task, [t for t in union if t not in have[task]], "top-up")
            if replay:
                lost = [t for t in have[task] if side.missing((task, t))]
                wanted.add(out, task, lost, "replay")
        more = config.max_trials - len(union)
        if task in regression and more > 0 and _suspect(candidate, baseline, task, union, few):
            extra = list(range(union[-1] + 1, union[-1] + 1 + more))
            wanted.add(wanted.candidate, task, extra, "regression")
            wanted.add(wanted.baseline, task, extra, "regression")
    return wanted


def errors_matter(
    config: Gate, candidate: GradedEpisodes, baseline: GradedEpisodes, cases: Sequence[PlayedTask]
) -> bool:
    """Whether the episodes without evidence could change the decision, so that playing them
    again is worth it: a side over the error ceiling, or a statistical rule that holds with them
    counted for the candidate and fails counted against it. Where they cannot, they are left as
    they are (a replay is a fresh episode: when errors fall more on some outcomes than others,
    replacing them would bias the side that had them)."""
    for side in (candidate, baseline):
        keys = side.keys()
        if keys and sum(side.missing(key) for key in keys) / len(keys) > config.max_error_rate:
            return True
    favoured, other = readings(candidate, baseline)
    if other is None:
        return False
    found, against = family(config, favoured, cases), family(config, other, cases)
    rules = {member.rule for member in found.members}
    return any(
        status(found.of(rule), against.of(rule), config.alpha)[2] == "errors" for rule in rules
    )


def _suspect(
    candidate: GradedEpisodes, baseline: GradedEpisodes, task: str, trials: list[int], few: int
) -> bool:
    """Whether a regression task's trials could hide a break: the candidate's rate on it below
    the baseline's, or, on fewer trials than could ever show a break (`few`), a candidate that
    passed none of them (1/1 -> 0/1 declined, but 0/1 -> 0/1 may be a task the baseline passes
    nine times in ten). Every trial one side lacks or holds without evidence counts against the
    candidate (its as a fail, the baseline's as a pass): a decline that missing evidence could
    hide still asks for trials."""

    def passes(side: GradedEpisodes, missing_passes: bool) -> list[bool]:
        return [
            missing_passes if side.missing((task, t)) else side.passed((task, t)) for t in trials
        ]

    mine, theirs = passes(candidate, False), passes(baseline, True)
    return sum(mine) < sum(theirs) or (len(trials) < few and not any(mine))


@dataclass
class Round:
    """One round of evidence played: what it was, and each side's new graded episodes (None
    for a side that had nothing to play)."""

    record: EvidenceRound
    candidate: GradedEpisodes | None
    baseline: GradedEpisodes | None


Play = Callable[[Plan, int], Awaitable[Round]]


@dataclass
class Gathered:
    """Both sides with the evidence played for them, what was played, and what was wanted but
    could not be played (None when nothing was)."""

    candidate: GradedEpisodes
    baseline: GradedEpisodes
    rounds: list[EvidenceRound]
    unplayed: Plan | None = None


def settled(
    config: Gate,
    candidate: GradedEpisodes,
    baseline: GradedEpisodes,
    cases: Sequence[PlayedTask],
    rounds: Sequence[Round],
) -> Gathered:
    """Both sides with the rounds played so far, and what the next round would play (as
    `unplayed`; None when nothing more is wanted or `ROUNDS` were played)."""
    views = (
        candidate.filled([r.candidate for r in rounds if r.candidate is not None]),
        baseline.filled([r.baseline for r in rounds if r.baseline is not None]),
    )
    wanted = plan(config, *views, cases, len(rounds) + 1) if len(rounds) < ROUNDS else Plan()
    return Gathered(*views, [r.record for r in rounds], wanted or None)


async def gather(
    config: Gate,
    candidate: GradedEpisodes,
    baseline: GradedEpisodes,
    cases: Sequence[PlayedTask],
    play: Play | None,
    played: Sequence[Round] = (),
) -> Gathered:
    """Play rounds of evidence (`plan`) with `play` until nothing more is wanted or `ROUNDS`
    were played; `played` are rounds played before (the same gate run again, or resumed).
    Without `play`, what the next round would play is left in `unplayed`."""
    rounds = list(played)
    while True:
        state = settled(config, candidate, baseline, cases, rounds)
        if state.unplayed is None or play is None:
            return state
        rounds.append(await play(state.unplayed, len(rounds) + 1))


EVIDENCE_FOR = "evidence_for"  # an evidence run's configuration: the run it adds trials to


def is_evidence(info: RunInfo) -> bool:
    """Whether a stored run holds a gate's evidence for another run (not a run of its own: no
    gate takes it as a candidate, and trends leave it out, as it plays only some tasks)."""
    return EVIDENCE_FOR in info.config


def stored_rounds(store: Store, candidate_run: str, baseline_run: str) -> list[Round]:
    """The rounds of evidence a gate of these two runs played before (finished runs whose
    configuration says they add to one of them against the other), in order."""
    found: dict[int, dict[str, GradedEpisodes]] = defaultdict(dict)
    records: dict[int, dict[str, RunInfo]] = defaultdict(dict)
    pair = {candidate_run: baseline_run, baseline_run: candidate_run}
    for info in store.runs():
        of, config = info.config.get(EVIDENCE_FOR), info.config
        if info.status != "done" or of not in pair or config.get("against") != pair[of]:
            continue
        side = "candidate" if of == candidate_run else "baseline"
        found[int(config["round"])][side] = GradedEpisodes.load(store, info.id)
        records[int(config["round"])][side] = info
    rounds = []
    for number in range(1, len(found) + 1):
        if number not in found:
            break  # a round missing: later ones are replanned
        sides, infos = found[number], records[number]
        why: dict[str, set[str]] = defaultdict(set)
        for info in infos.values():
            for task, reasons in info.config.get("why", {}).items():
                why[task].update(reasons)
        record_ = EvidenceRound(
            round=number,
            candidate_run=infos["candidate"].id if "candidate" in infos else None,
            baseline_run=infos["baseline"].id if "baseline" in infos else None,
            candidate_episodes=len(sides["candidate"].keys()) if "candidate" in sides else 0,
            baseline_episodes=len(sides["baseline"].keys()) if "baseline" in sides else 0,
            why={task: sorted(reasons) for task, reasons in sorted(why.items())},
        )
        rounds.append(Round(record_, sides.get("candidate"), sides.get("baseline")))
    return rounds


def record(
    wanted: Plan, round_: int, candidate_run: str | None, baseline_run: str | None
) -> EvidenceRound:
    """What a round played, as the gate's result shows it."""
    return EvidenceRound(
        round=round_,
        candidate_run=candidate_run,
        baseline_run=baseline_run,
        candidate_episodes=wanted.episodes(wanted.candidate),
        baseline_episodes=wanted.episodes(wanted.baseline),
        why={task: sorted(why) for task, why in sorted(wanted.why.items())},
    )

"""The sim-to-real report: how far a run's simulated users behave like production's real ones.

Both sides are measured with the same functions (`behaviour.measure`): the simulated users in
each stored episode of the run (the task's prior `history` left out; episodes that ended in a
harness `error` are not a user's behaviour and are left out; after an end the user did not
choose, such as the turn limit, an error in the last reply is no abandonment), and the users of
the production sessions the source and filters give.

Per dimension (`FAMILIES`), the two distributions are summarised side by side and compared by
their Kolmogorov-Smirnov distance (the largest gap between their cumulative distributions; for a
yes/no dimension, the gap between the two rates). A dimension with fewer than `MIN_VALUES`
sessions holding a value on either side (reactions exist only where the agent erred) is left out
and named.

The distance between two *samples* is biased up: two samples of the very same users differ by
their noise, so the plug-in distance of a perfect simulator is about 0.9 x sqrt(1/n + 1/m), not
0, and a plug-in index scored a perfect simulator 91-96 depending on the sample sizes. Each
dimension's distance is therefore corrected (`_Correction`): the bootstrap gives the noise
alone, the largest gap between the resampled and the observed difference of the two
distributions, whose mean is what identical users would show at these sample sizes and with this
clustering; that mean is subtracted in full from a distance that noise alone explains and less
and less from one well beyond it (weighted by exp(-(D/s)^2 / 2), s the noise's root mean square,
normalised so that the subtraction's expectation under identical users is the noise's mean). The
corrected distance is unbiased for identical users and for well-separated ones, and in between
errs by at most about half the noise's standard deviation, towards agreement (no estimator of a
distance is unbiased everywhere: its true value 0 is a boundary). A dimension's agreement is 1 -
its corrected distance, and can exceed 1 by noise when the two sides agree.

Production's users are also a mix of populations (the profiles `personas from-traces` mines:
`profiles.populations`), and a simulator can leave one out. Averaged over dimensions, that
barely shows: a population with a fifth of the traffic moves each dimension by at most a fifth,
most dimensions not at all, and a mix that lost its impatient users (who abandon) read 96 beside
the full mix's 101, against production's own three populations. So every session of either side
is put in the population whose information traits are nearest its own (`Populations.assign`:
how it discloses, which is what a persona sets and a simulator plays; the style of an opening is
real users' own), and the *coverage* is 1 - the total variation distance between the
populations' production shares and simulated shares: the share of production's traffic whose
kind of user the simulation plays. Its distance is bias-corrected as a dimension's is (its noise:
how far the resampled difference of the shares moves). The fidelity index is 100 x the coverage
x the mean over the five families of the mean agreement of their dimensions (families, so that
seven style proxies do not outweigh information disclosure): a simulator whose users behave
like production's reads 100 on average at any sample size (a reading a little above 100 is
noise), one that lost a population of a fifth of the traffic loses about a fifth of its index
(and its dimensions' share of it), and `plug_in_index` keeps the uncorrected figure. With one
population the coverage is 1 and the index the mean over families. The shares are what a small
sample estimates worst (20 tasks draw 20 kinds of user): the index is noisier than a mean over
dimensions, and its interval says so.

Its 95% interval is the percentile interval of the corrected index over `BOOTSTRAP` resamples
that draw production sessions and, on the simulated side, tasks with all their episodes (a
task's trials are not independent); it is meant to cover the index of the two populations,
clustered by task. A distance at its boundary makes no bootstrap interval exact, so its
coverage is measured where the truth is known (`bench/fidelity.py`: a simulator identical to
production, a slightly easier and a much easier one, one that lost a population, at several
sample sizes): README quotes the figures.

A dimension is *easy mode* when simulation differs from production in the direction that makes
the agent's job easier (`EASIER`: more front-loaded, less asking back, less pushback, fewer
abandons, more accepting or quietly pivoting), the bootstrap interval of the difference of
means lies entirely on that side, and its agreement is below `EASY_AGREEMENT`.

Outcome calibration compares, on the run's tasks made from production traces (their `source`),
the simulated pass rate with the outcome production had for the same sessions (a `success`
task's sessions succeeded, a `failure` task's failed), both weighted by the task's session
count; a positive gap means simulation is more optimistic than production.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from harness.grading.result import Verdict
from harness.production.behaviour import SessionBehaviour, measure
from harness.production.profiles import populations
from harness.transcript import EndReason, Transcript

if TYPE_CHECKING:
    from harness.store import Store
    from harness.store.tasks import StoredTask

FAMILIES: dict[str, tuple[str, ...]] = {
    "information": ("disclosure_first", "ambiguous_start"),
    "clarification": ("asks_back", "question_rate"),
    "error reaction": ("pushback", "rephrase", "pivot", "accept", "abandon"),
    "patience": ("user_turns", "abandoned"),
    "style": (
        "words_per_turn",
        "exclamation_rate",
        "capitals",
        "emoji_rate",
        "typos",
        "formality",
        "ascii_letters",
    ),
}
DIMENSIONS = tuple(name for names in FAMILIES.values() for name in names)
FAMILY_OF = {name: family for family, names in FAMILIES.items() for name in names}
# +1: a higher value makes the agent's job easier; -1: a lower one
EASIER = {
    "disclosure_first": 1,
    "ambiguous_start": -1,
    "asks_back": -1,
    "pushback": -1,
    "rephrase": -1,
    "abandon": -1,
    "abandoned": -1,
    "pivot": 1,
    "accept": 1,
}
EASY_WORDS = {
    "disclosure_first": "front-load more of the facts",
    "ambiguous_start": "open without the needed facts less often",
    "asks_back": "ask back less",
    "pushback": "push back less after an agent error",
    "rephrase": "rephrase less after an agent error",
    "abandon": "abandon less after an agent error",
    "abandoned": "abandon fewer sessions",
    "pivot": "quietly pivot more after an agent error",
    "accept": "accept an agent error more",
}
# the ends a simulated user chose (its stop, transfer and out-of-scope signals); after any other
# (a turn limit, a timeout, the agent's handoff or crash) an error in the last reply is no
# abandonment: the user had no turn to react
USER_ENDS = (EndReason.USER_STOP, EndReason.TRANSFER, EndReason.OUT_OF_SCOPE)
MIN_VALUES = 5
BOOTSTRAP = 1000
CONFIDENCE = 0.95
EASY_AGREEMENT = 0.9
BLOCK = 2_000_000  # bootstrap weights held at once (resamples x sessions): about 16 MB


class Distribution(BaseModel):
    """One side's values of a dimension."""

    model_config = ConfigDict(extra="forbid")

    sessions: int = Field(description="Sessions with a value.")
    mean: float | None = Field(description="Mean (for a yes/no dimension, the rate).")
    p10: float | None = Field(description="10th percentile.")
    median: float | None = Field(description="Median.")
    p90: float | None = Field(description="90th percentile.")


class DimensionAgreement(BaseModel):
    """A dimension compared between simulated and production users."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The dimension (a `SessionBehaviour` field).")
    family: str = Field(description="Its family (`FAMILIES`).")
    simulated: Distribution = Field(description="The run's simulated users.")
    production: Distribution = Field(description="Production's users.")
    agreement: float | None = Field(
        description="1 - the bias-corrected Kolmogorov-Smirnov distance (can exceed 1 by "
        "noise when the two sides agree); None when left out."
    )
    plug_in: float | None = Field(
        default=None,
        description="1 - the plug-in Kolmogorov-Smirnov distance of the two samples, biased "
        "low by their noise (None: left out, or a report from before the correction).",
    )
    noise: float | None = Field(
        default=None,
        description="The distance two samples of identical users show on average at these "
        "sizes (the bootstrap's estimate; what the correction subtracts at most).",
    )
    difference: float | None = Field(description="Simulated mean - production mean.")
    difference_interval: tuple[float, float] | None = Field(
        description="Its 95% bootstrap interval (production sessions, simulated tasks)."
    )
    easy_mode: bool = Field(description="Simulation is easier than production here.")
    note: str = Field(default="", description="Why it is left out, or how it is easy mode.")


class OutcomeRow(BaseModel):
    """One task made from production traces: what production saw and what the run did."""

    task_id: str
    kind: str = Field(description="`success` or `failure`: the production outcome.")
    sessions: int = Field(description="Production sessions the task stands for.")
    simulated_pass: float = Field(description="Share of its graded episodes that passed.")
    graded: int = Field(description="Its graded episodes (errors left out).")


class OutcomeCalibration(BaseModel):
    """The simulated pass rate against production's outcome on the same sessions."""

    tasks: int = Field(description="Tasks made from production with graded episodes.")
    sessions: int = Field(description="Production sessions they stand for.")
    production_success: float = Field(description="Share of those sessions that succeeded.")
    simulated_pass: float = Field(description="The run's pass rate, weighted the same.")
    gap: float = Field(description="simulated_pass - production_success (> 0: optimistic).")
    gap_interval: tuple[float, float] = Field(description="95% bootstrap interval over tasks.")
    rows: list[OutcomeRow] = Field(default_factory=list)


class PopulationShare(BaseModel):
    """One population of production's users (a profile, as `personas from-traces` finds them)
    and the share of the simulated users nearest to it."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The profile's name (how it discloses, how it reacts, ...).")
    production_share: float = Field(description="Its share of the production sessions.")
    simulated_share: float = Field(description="Share of the simulated sessions nearest to it.")
    production_sessions: int = Field(description="Its production sessions.")
    simulated_sessions: int = Field(description="The simulated sessions nearest to it.")


class FidelityReport(BaseModel):
    """`harness fidelity`: a run's simulated users against production's."""

    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(default="", description="The simulated run.")
    source: str = Field(default="", description="The production source.")
    simulated_sessions: int = Field(description="The run's episodes measured.")
    simulated_tasks: int = Field(description="Their tasks (the simulated bootstrap clusters).")
    production_sessions: int = Field(description="Production sessions measured.")
    left_out: int = Field(default=0, description="Episodes left out (harness errors, no turn).")
    index: float | None = Field(
        description="Fidelity index, 0..100, bias-corrected: 100 x `coverage` x the mean over "
        "families of their dimensions' agreement. A simulator identical to production reads "
        "100 on average, a little above 100 by noise (None: nothing comparable)."
    )
    interval: tuple[float, float] | None = Field(
        description="Its 95% percentile bootstrap interval (coverage measured by "
        "bench/fidelity.py)."
    )
    plug_in_index: float | None = Field(
        default=None,
        description="The index from plug-in distances, biased low by sampling noise (None in "
        "a report from before the correction).",
    )
    coverage: float | None = Field(
        default=None,
        description="Share of production's traffic whose population the simulated users play: "
        "1 - the total variation distance between the populations' production shares and the "
        "shares of simulated sessions nearest to each, bias-corrected (None: no population, "
        "or a report from before populations were compared).",
    )
    populations: list[PopulationShare] = Field(
        default_factory=list, description="Production's populations, largest first."
    )
    covers: str = Field(description="What the interval covers.")
    families: dict[str, float | None] = Field(
        description="Each family's mean agreement over all sessions."
    )
    dimensions: list[DimensionAgreement] = Field(description="Every dimension, in order.")
    easy_mode: list[str] = Field(description="The easy-mode dimensions.")
    outcome: OutcomeCalibration | None = Field(
        default=None, description="On tasks made from production traces, when the run has any."
    )


@dataclass
class _Dimension:
    """One dimension's values on both sides, indexed into their pooled distinct values."""

    sim: np.ndarray  # index into `grid` per simulated session, -1 when it has no value
    prod: np.ndarray
    sim_values: np.ndarray  # the values (nan: none)
    prod_values: np.ndarray
    size: int  # len(grid)


def _values(behaviours: Sequence[SessionBehaviour], name: str) -> np.ndarray:
    return np.array(
        [np.nan if (v := getattr(b, name)) is None else float(v) for b in behaviours], dtype=float
    )


def _dimension(sim: np.ndarray, prod: np.ndarray) -> _Dimension:
    known = np.concatenate([sim[~np.isnan(sim)], prod[~np.isnan(prod)]])
    grid = np.unique(known)

    def index(values: np.ndarray) -> np.ndarray:
        found = np.searchsorted(grid, np.nan_to_num(values))
        return np.where(np.isnan(values), -1, found)

    return _Dimension(index(sim), index(prod), sim, prod, len(grid))


def _cdfs(index: np.ndarray, weights: np.ndarray, size: int) -> np.ndarray:
    """Each row of `weights` (sessions' weights) as a cumulative distribution over the grid
    (rows x size); a row that gives no weight to a session with a value is all nan."""
    held = np.flatnonzero(index >= 0)
    order = held[np.argsort(index[held], kind="stable")]  # sessions by their grid value
    values = index[order]
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]]) if len(order) else order
    counts = np.zeros((weights.shape[0], size))
    if len(order):
        counts[:, values[starts]] = np.add.reduceat(weights[:, order], starts, axis=1)
    totals = counts.sum(axis=1, keepdims=True)
    return np.cumsum(counts, axis=1) / np.where(totals > 0, totals, np.nan)


def _means(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Each row's weighted mean of the values held (nan where it holds none)."""
    held = ~np.isnan(values)
    totals = weights @ held.astype(float)
    sums = weights @ np.where(held, values, 0.0)
    return sums / np.where(totals > 0, totals, np.nan)


def _mean_of(rows: list[np.ndarray]) -> np.ndarray:
    """Element-wise mean of the arrays, ignoring nan (nan where all are)."""
    stack = np.vstack(rows)
    held = ~np.isnan(stack)
    count = held.sum(axis=0)
    total = np.where(held, stack, 0.0).sum(axis=0)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _index_of(agreements: dict[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """100 x the mean over families of their dimensions' mean agreement, element-wise (each
    array one estimate or one per resample; nan: left out)."""
    families = {
        family: _mean_of([agreements[n] for n in names if n in agreements])
        for family, names in FAMILIES.items()
        if any(n in agreements for n in names)
    }
    if not families:
        return np.array([np.nan]), {}
    return 100.0 * _mean_of(list(families.values())), families


@dataclass
class _Correction:
    """A dimension's bias correction, from the bootstrap's noise alone: `noise` holds, per
    resample, the largest gap between the resampled and the observed difference of the two
    cumulative distributions, which is what two samples of identical users differ by (clustered
    by task, at these sizes). A distance D loses `mean` x exp(-(D/scale)^2 / 2) / `norm`: in
    full when noise explains it, hardly anything when it is well beyond the noise. `norm` is the
    weight's mean over the noise, so that under identical users the expected subtraction is the
    expected distance, and the corrected distance is unbiased there."""

    mean: float
    scale: float
    norm: float

    @classmethod
    def of(cls, noise: np.ndarray) -> _Correction:
        noise = noise[~np.isnan(noise)]
        if not len(noise) or not noise.any():
            return cls(0.0, 0.0, 1.0)  # no noise: one value on both sides, nothing to correct
        scale = float(np.sqrt((noise**2).mean()))
        return cls(float(noise.mean()), scale, float(np.exp(-0.5 * (noise / scale) ** 2).mean()))

    def __call__(self, distance: np.ndarray) -> np.ndarray:
        if self.scale == 0:
            return distance
        return distance - self.mean * np.exp(-0.5 * (distance / self.scale) ** 2) / self.norm


def _weights(
    rng: np.random.Generator, bootstrap: int, task_of: np.ndarray, clusters: int, prod: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The bootstrap's resamples in blocks, as weights (resamples x sessions) of the simulated
    sessions (each task drawn with all its episodes) and of the production sessions; blocks
    keep about `BLOCK` weights in memory."""
    block = max(1, BLOCK // max(len(task_of), prod, 1))
    done = 0
    while done < bootstrap:
        size = min(block, bootstrap - done)
        picked = _counts(rng.integers(0, clusters, (size, clusters)), clusters)
        yield picked[:, task_of], _counts(rng.integers(0, prod, (size, prod)), prod)
        done += size


def _counts(draws: np.ndarray, size: int) -> np.ndarray:
    """How often each of `size` items was drawn, per row of draws (rows x size)."""
    rows = draws.shape[0]
    places = (np.arange(rows)[:, None] * size + draws).ravel()
    return np.bincount(places, minlength=rows * size).reshape(rows, size).astype(float)


def _distribution(values: np.ndarray) -> Distribution:
    known = values[~np.isnan(values)]
    if not len(known):
        return Distribution(sessions=0, mean=None, p10=None, median=None, p90=None)
    p10, median, p90 = (float(q) for q in np.quantile(known, [0.1, 0.5, 0.9]))
    return Distribution(
        sessions=len(known), mean=float(known.mean()), p10=p10, median=median, p90=p90
    )


def _percentiles(values: np.ndarray | list[float]) -> tuple[float, float] | None:
    """The percentile bootstrap interval of the resampled values (None without any)."""
    found = np.asarray(values, dtype=float)
    found = found[~np.isnan(found)]
    if not len(found):
        return None
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(found, [tail, 100 - tail])
    return float(low), float(high)


def _number(value: np.ndarray | float) -> float | None:
    value = float(np.asarray(value).reshape(-1)[0])
    return None if np.isnan(value) else value


def _shares(labels: np.ndarray, weights: np.ndarray, count: int) -> np.ndarray:
    """Per row of weights, each population's share of the weighted sessions (rows x count;
    0 where a row weighs no session)."""
    found = np.zeros((weights.shape[0], count))
    for c in range(count):
        found[:, c] = weights[:, labels == c].sum(axis=1)
    totals = found.sum(axis=1, keepdims=True)
    return found / np.where(totals > 0, totals, 1.0)


def compare_behaviour(
    simulated: Sequence[SessionBehaviour],
    tasks: Sequence[str],
    production: Sequence[SessionBehaviour],
    bootstrap: int = BOOTSTRAP,
    seed: int = 0,
) -> FidelityReport:
    """Simulated sessions (each with its task, the bootstrap's cluster) against production's
    (see the module's doc)."""
    clusters = {task: n for n, task in enumerate(dict.fromkeys(tasks))}
    task_of = np.array([clusters[t] for t in tasks], dtype=int)
    dims = {n: _dimension(_values(simulated, n), _values(production, n)) for n in DIMENSIONS}
    # production's populations; every session of either side in the one it is nearest to
    found = populations(production, seed) if production else None
    known = found.profiles if found is not None else []
    sim_of = found.assign(simulated) if found is not None else np.zeros(len(simulated), int)
    prod_of = found.assign(production) if found is not None else np.zeros(len(production), int)
    share_sim = _shares(sim_of, np.ones((1, len(simulated))), len(known))[0]
    share_prod = _shares(prod_of, np.ones((1, len(production))), len(known))[0]
    shares: list[np.ndarray] = []  # per resample, the simulated minus the production shares
    comparable = {
        n: d
        for n, d in dims.items()
        if (d.sim >= 0).sum() >= MIN_VALUES and (d.prod >= 0).sum() >= MIN_VALUES
    }
    # the observed difference of the two distributions, per comparable dimension
    observed = {
        n: _cdfs(d.sim, np.ones((1, len(simulated))), d.size)[0]
        - _cdfs(d.prod, np.ones((1, len(production))), d.size)[0]
        for n, d in comparable.items()
    }
    resampled: dict[str, list[np.ndarray]] = {n: [] for n in comparable}
    noise: dict[str, list[np.ndarray]] = {n: [] for n in comparable}
    differences: dict[str, list[np.ndarray]] = {n: [] for n in EASIER if n in comparable}
    rng = np.random.default_rng(seed)
    if simulated and production:
        for w_sim, w_prod in _weights(rng, bootstrap, task_of, len(clusters), len(production)):
            for n, d in comparable.items():
                gap = _cdfs(d.sim, w_sim, d.size) - _cdfs(d.prod, w_prod, d.size)
                held = ~np.isnan(gap[:, 0])
                resampled[n].append(np.where(held, np.abs(np.nan_to_num(gap)).max(axis=1), np.nan))
                shift = np.abs(np.nan_to_num(gap - observed[n])).max(axis=1)
                noise[n].append(np.where(held, shift, np.nan))
            for n in differences:
                d = dims[n]
                differences[n].append(_means(d.sim_values, w_sim) - _means(d.prod_values, w_prod))
            shares.append(_shares(sim_of, w_sim, len(known)) - _shares(prod_of, w_prod, len(known)))
    corrections = {n: _Correction.of(np.concatenate(noise[n] or [np.empty(0)])) for n in comparable}
    plug_in = {n: np.array([np.abs(observed[n]).max()]) for n in comparable}
    agreements = {n: 1.0 - corrections[n](plug_in[n]) for n in comparable}
    draws = {
        n: 1.0 - corrections[n](np.concatenate(resampled[n] or [np.empty(0)])) for n in comparable
    }
    # coverage: 1 - the total variation distance of the population shares, corrected as a
    # dimension's distance is (its noise: how far the resampled difference moves)
    share_gap = share_sim - share_prod
    moved = np.vstack(shares) if shares else np.empty((0, len(known)))
    fix = _Correction.of(0.5 * np.abs(moved - share_gap).sum(axis=1))
    distance = np.array([0.5 * np.abs(share_gap).sum()])
    coverage = 1.0 - fix(distance)
    alike, families = _index_of(agreements)
    index = coverage * alike
    if bootstrap and simulated and production:
        indexes = (1.0 - fix(0.5 * np.abs(moved).sum(axis=1))) * _index_of(draws)[0]
    else:
        indexes = np.empty(0)

    rows: list[DimensionAgreement] = []
    for name, dim in dims.items():
        sim_side, prod_side = _distribution(dim.sim_values), _distribution(dim.prod_values)
        difference = (
            sim_side.mean - prod_side.mean
            if sim_side.mean is not None and prod_side.mean is not None
            else None
        )
        interval = _percentiles(np.concatenate(differences.get(name) or [np.empty(0)]))
        agreement = _number(agreements[name]) if name in comparable else None
        easy, note = False, ""
        if name not in comparable:
            note = (
                f"left out: {sim_side.sessions} simulated and {prod_side.sessions} production "
                f"sessions have a value (at least {MIN_VALUES} each needed)"
            )
        elif name in EASIER and interval is not None and agreement is not None:
            side = EASIER[name]
            easy = min(side * interval[0], side * interval[1]) > 0 and (agreement < EASY_AGREEMENT)
            if easy:
                note = f"simulated users {EASY_WORDS[name]} than production's"
        rows.append(
            DimensionAgreement(
                name=name,
                family=FAMILY_OF[name],
                simulated=sim_side,
                production=prod_side,
                agreement=agreement,
                plug_in=_number(1.0 - plug_in[name]) if name in comparable else None,
                noise=corrections[name].mean if name in comparable else None,
                difference=difference,
                difference_interval=interval,
                easy_mode=easy,
                note=note,
            )
        )
    point = _number(index)
    return FidelityReport(
        simulated_sessions=len(simulated),
        simulated_tasks=len(clusters),
        production_sessions=len(production),
        index=point,
        interval=_percentiles(indexes) if point is not None else None,
        plug_in_index=_number(
            (1.0 - distance) * _index_of({n: 1.0 - v for n, v in plug_in.items()})[0]
        ),
        coverage=_number(coverage) if known else None,
        populations=[
            PopulationShare(
                name=profile.name,
                production_share=float(share_prod[c]),
                simulated_share=float(share_sim[c]),
                production_sessions=int((prod_of == c).sum()),
                simulated_sessions=int((sim_of == c).sum()),
            )
            for c, profile in enumerate(known)
        ],
        covers=f"{CONFIDENCE:.0%} percentile bootstrap of the bias-corrected index "
        f"({bootstrap} resamples) over {len(production)} production sessions and "
        f"{len(clusters)} simulated tasks (each with all its episodes)",
        families={f: _number(families[f]) if f in families else None for f in FAMILIES},
        dimensions=rows,
        easy_mode=[r.name for r in rows if r.easy_mode],
    )


def simulated_behaviour(
    transcripts: Iterable[tuple[Transcript, str | None, str | None]], histories: dict[str, int]
) -> tuple[list[SessionBehaviour], list[str], int]:
    """The simulated users of a run's stored transcripts (`Store.transcripts`), each measured
    without its task's prior history (`histories`: task id -> messages of `start.history`):
    (behaviours, their task ids, episodes left out)."""
    found: list[SessionBehaviour] = []
    tasks: list[str] = []
    left_out = 0
    for transcript, _, _ in transcripts:
        messages = transcript.messages[histories.get(transcript.task_id, 0) :]
        cut_off = transcript.end_reason not in USER_ENDS  # the user did not choose to leave
        behaviour = measure(messages, f"{transcript.task_id}#{transcript.trial}", cut_off=cut_off)
        if transcript.end_reason == EndReason.ERROR or behaviour.user_turns == 0:
            left_out += 1
            continue
        found.append(behaviour)
        tasks.append(transcript.task_id)
    return found, tasks, left_out


def outcome_calibration(
    tasks: Sequence[StoredTask],
    verdicts: Iterable[Verdict],
    bootstrap: int = BOOTSTRAP,
    seed: int = 0,
) -> OutcomeCalibration | None:
    """The run's pass rate on its tasks made from production traces against production's
    outcome of the same sessions (see the module's doc); None without such a graded task."""
    outcomes: dict[str, list[bool]] = {}
    for verdict in verdicts:
        if verdict.outcome != "error":
            outcomes.setdefault(verdict.task_id, []).append(verdict.outcome == "pass")
    rows = []
    for stored in tasks:
        source = stored.spec.get("source") or {}
        graded = outcomes.get(stored.task.id, [])
        if source.get("kind") not in ("success", "failure") or not graded:
            continue
        rows.append(
            OutcomeRow(
                task_id=stored.task.id,
                kind=source["kind"],
                sessions=int(source.get("count") or 1),
                simulated_pass=sum(graded) / len(graded),
                graded=len(graded),
            )
        )
    if not rows:
        return None
    weights = np.array([r.sessions for r in rows], dtype=float)
    real = np.array([r.kind == "success" for r in rows], dtype=float)
    sim = np.array([r.simulated_pass for r in rows])

    def gap(w: np.ndarray) -> float:
        return float(((sim - real) * w).sum() / w.sum())

    rng = np.random.default_rng(seed)
    gaps = [
        gap(weights * np.bincount(rng.integers(0, len(rows), len(rows)), minlength=len(rows)))
        for _ in range(bootstrap)
    ]
    interval = _percentiles(gaps)
    assert interval is not None
    return OutcomeCalibration(
        tasks=len(rows),
        sessions=int(weights.sum()),
        production_success=float((real * weights).sum() / weights.sum()),
        simulated_pass=float((sim * weights).sum() / weights.sum()),
        gap=gap(weights),
        gap_interval=interval,
        rows=rows,
    )


def run_fidelity(
    store: Store,
    run_id: str,
    production: Iterable[SessionBehaviour],
    source: str = "",
    bootstrap: int = BOOTSTRAP,
    seed: int = 0,
) -> FidelityReport:
    """`harness fidelity` as one call: a stored run's simulated users against the production
    sessions measured (`behaviour.measure_calls`), with the outcome calibration of its tasks
    made from production traces."""
    tasks = store.run_tasks(run_id)
    histories = {t.task.id: len(t.spec.get("start", {}).get("history") or []) for t in tasks}
    simulated, task_ids, left_out = simulated_behaviour(store.transcripts(run_id), histories)
    report = compare_behaviour(simulated, task_ids, list(production), bootstrap, seed)
    report.run_id, report.source, report.left_out = run_id, source, left_out
    report.outcome = outcome_calibration(tasks, store.latest_verdicts(run_id), bootstrap, seed)
    return redacted(report)


def redacted(report: FidelityReport) -> FidelityReport:
    """The report with every string passed through `harness.secrets.redact_pii`: it names its
    production source and tasks made from production, and is printed, stored and rendered."""
    from harness.secrets import redact_data, redactor

    return FidelityReport.model_validate(redact_data(report.model_dump(), redactor(pii=True)))

"""Simulated users against production's, dimension by dimension: the bias-corrected
Kolmogorov-Smirnov agreement, the populations' coverage, the fidelity index and its
task-clustered bootstrap interval, and easy mode (the method is `harness.fidelity`'s doc)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from harness.fidelity.dimensions import DIMENSIONS, EASIER, EASY_WORDS, FAMILIES, FAMILY_OF
from harness.fidelity.results import (
    DimensionAgreement,
    Distribution,
    FidelityReport,
    PopulationShare,
)
from harness.production.behaviour import SessionBehaviour
from harness.production.profiles import populations

MIN_VALUES = 5
BOOTSTRAP = 1000
CONFIDENCE = 0.95
EASY_AGREEMENT = 0.9
BLOCK = 2_000_000  # bootstrap weights held at once (resamples x sessions): about 16 MB


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


def percentiles(values: np.ndarray | list[float]) -> tuple[float, float] | None:
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
    (see `harness.fidelity`'s doc)."""
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
        interval = percentiles(np.concatenate(differences.get(name) or [np.empty(0)]))
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
        interval=percentiles(indexes) if point is not None else None,
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

"""Sessions' measured behaviour clustered into a few user profiles, with their share of traffic.

Sessions are clustered on the traits every session shows (`CLUSTERED`: information pattern,
patience, style), not on their reactions to agent errors nor on how often they ask back: those
are the outcomes of the one to three chances a session gives (an agent error, a question),
so clustering on them splits one population by chance outcomes (a population asking back in 20%
of its answers becomes "askers" and "non-askers"); they are each profile's rates instead (mean
over its sessions that had the chance). Populations that differ only in those are therefore
one profile, with the mixed rates.

The traits (booleans as 0/1; a missing value, such as the disclosure share of a session
without facts, takes the mean of the sessions that have one) are put in natural units
(`UNITS`: shares as they are, turns and words scaled to a clear difference), and k-means
(k-means++ seeding, a fixed seed, a few restarts) is run for k = 2..4; the k kept has the best
mean silhouette (computed on at most `SILHOUETTE_SAMPLE` sessions), and the sessions are one
profile unless that silhouette reaches `MIN_SILHOUETTE`. A profile reports the mean and median
of every dimension over its own sessions (None values left out).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from harness.production.behaviour import NUMERIC, REACTIONS, SessionBehaviour

MAX_PROFILES = 4
MIN_SILHOUETTE = 0.25  # below it, the sessions are one population
SILHOUETTE_SAMPLE = 2000
RESTARTS = 4
ITERATIONS = 100
# What one unit of difference is on each clustered dimension: a share differs by 1 at most, a
# session by 5 user turns or 10 words per turn is a clearly different user. Not standardised:
# scaling by the spread would make a rare small proxy (typos in a few sessions of one
# population) as decisive as front-loading, and split a population on noise.
UNITS = {"user_turns": 5.0, "words_per_turn": 10.0}
OUTCOMES = (*REACTIONS, "asks_back", "question_rate", "clarify")  # per-chance outcomes
CLUSTERED = tuple(n for n in NUMERIC if n not in OUTCOMES)


class Profile(BaseModel):
    """A group of sessions whose users behave alike."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="A readable name made from its values (see `profile_name`).")
    sessions: int = Field(description="Number of sessions in the profile.")
    share: float = Field(description="Its share of the sessions (traffic share), 0..1.")
    mean: dict[str, float | None] = Field(
        description="Mean of each dimension over its sessions that have a value (None: none)."
    )
    median: dict[str, float | None] = Field(
        description="Median of each dimension over its sessions that have a value."
    )
    keys: list[str] = Field(default_factory=list, description="Its sessions' keys.")


def matrix(
    behaviours: Sequence[SessionBehaviour], dimensions: Sequence[str] = CLUSTERED
) -> np.ndarray:
    """Sessions x dimensions in `UNITS` (a missing value takes the dimension's mean)."""
    raw = np.array(
        [
            [np.nan if (v := getattr(b, n)) is None else float(v) for n in dimensions]
            for b in behaviours
        ],
        dtype=float,
    ).reshape(len(behaviours), len(dimensions))
    known = ~np.isnan(raw)
    counts = known.sum(axis=0)
    means = np.where(counts > 0, np.nansum(raw, axis=0) / np.maximum(counts, 1), 0.0)
    filled = np.where(known, raw, means)
    return filled / np.array([UNITS.get(n, 1.0) for n in dimensions])


def _distances(points: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Squared Euclidean distance of each point to each centre."""
    return (
        (points**2).sum(axis=1)[:, None] - 2 * points @ centres.T + (centres**2).sum(axis=1)[None]
    ).clip(min=0)


def kmeans(points: np.ndarray, k: int, seed: int = 0) -> tuple[np.ndarray, float]:
    """Labels of the best of `RESTARTS` k-means runs (k-means++ seeding from `seed`) and its
    within-cluster sum of squares."""
    rng = np.random.default_rng(seed)
    best: tuple[np.ndarray, float] | None = None
    for _ in range(RESTARTS):
        centres = points[[rng.integers(len(points))]]
        while len(centres) < k:
            nearest = _distances(points, centres).min(axis=1)
            total = nearest.sum()
            pick = (
                rng.choice(len(points), p=nearest / total)
                if total > 0
                else rng.integers(len(points))
            )
            centres = np.vstack([centres, points[pick]])
        labels = np.zeros(len(points), dtype=int)
        for _ in range(ITERATIONS):
            labels = _distances(points, centres).argmin(axis=1)
            moved = np.array(
                [
                    points[labels == c].mean(axis=0) if (labels == c).any() else centres[c]
                    for c in range(k)
                ]
            )
            if np.allclose(moved, centres):
                break
            centres = moved
        inertia = float(_distances(points, centres)[np.arange(len(points)), labels].sum())
        if best is None or inertia < best[1]:
            best = (labels, inertia)
    assert best is not None
    return best


def silhouette(points: np.ndarray, labels: np.ndarray) -> float:
    """Mean silhouette of the points (0 with fewer than two clusters)."""
    clusters = np.unique(labels)
    if len(clusters) < 2:
        return 0.0
    apart = np.sqrt(_distances(points, points))
    scores = []
    for i, label in enumerate(labels):
        own = labels == label
        if own.sum() < 2:
            scores.append(0.0)
            continue
        inside = apart[i, own].sum() / (own.sum() - 1)
        outside = min(apart[i, labels == other].mean() for other in clusters if other != label)
        scores.append((outside - inside) / max(inside, outside) if max(inside, outside) else 0.0)
    return float(np.mean(scores))


def choose_labels(points: np.ndarray, seed: int = 0) -> np.ndarray:
    """The clustering kept: k in 1..`MAX_PROFILES` by silhouette (see the module's doc)."""
    rng = np.random.default_rng(seed)
    sample = rng.permutation(len(points))[:SILHOUETTE_SAMPLE]
    best, labels = MIN_SILHOUETTE, np.zeros(len(points), dtype=int)
    for k in range(2, min(MAX_PROFILES, len(points) - 1) + 1):
        found, _ = kmeans(points, k, seed)
        score = silhouette(points[sample], found[sample])
        if score > best:
            best, labels = score, found
    return labels


def _summary(values: list[float | None], how: str) -> float | None:
    known = [v for v in values if v is not None]
    if not known:
        return None
    return float(np.mean(known) if how == "mean" else np.median(known))


def profile_name(mean: dict[str, float | None]) -> str:
    """A name from a profile's means: how it discloses (`front-loading` at 0.6 or more of the
    facts in the first message, else `gradual`), its most frequent reaction to errors, and
    `asks back` when a third or more of its turns ask."""
    first = mean.get("disclosure_first")
    parts = [
        "unknown disclosure" if first is None else "front-loading" if first >= 0.6 else "gradual"
    ]
    reactions = {
        "pushes back": mean.get("pushback"),
        "rephrases": mean.get("rephrase"),
        "pivots": mean.get("pivot"),
        "accepts": mean.get("accept"),
        "abandons": mean.get("abandon"),
    }
    known = {name: rate for name, rate in reactions.items() if rate is not None}
    if known:
        parts.append(max(known, key=lambda name: known[name]))
    if (mean.get("asks_back") or 0.0) >= 1 / 3:
        parts.append("asks back")
    return ", ".join(parts)


def profiles(behaviours: Sequence[SessionBehaviour], seed: int = 0) -> list[Profile]:
    """The sessions clustered into profiles, largest first, with distinct names."""
    if not behaviours:
        return []
    labels = choose_labels(matrix(behaviours), seed)
    found: list[Profile] = []
    names: dict[str, int] = {}
    for label in sorted(set(labels.tolist()), key=lambda c: -(labels == c).sum()):
        members = [b for b, own in zip(behaviours, labels == label, strict=True) if own]
        mean = {n: _summary([getattr(b, n) for b in members], "mean") for n in NUMERIC}
        median = {n: _summary([getattr(b, n) for b in members], "median") for n in NUMERIC}
        name = profile_name(mean)
        names[name] = names.get(name, 0) + 1
        found.append(
            Profile(
                name=name if names[name] == 1 else f"{name} ({names[name]})",
                sessions=len(members),
                share=len(members) / len(behaviours),
                mean=mean,
                median=median,
                keys=[b.key for b in members],
            )
        )
    return found

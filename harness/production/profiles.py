"""Sessions' measured behaviour clustered into a few user profiles, with their share of traffic.

Sessions are clustered on what shows the user rather than what happened to the session
(`CLUSTERED`): how they disclose information (`disclosure_first`, `ambiguous_start`) and the style
of their opening message (`opening_*`: words, `!`, capitals, emoji, typos, polite words, ASCII).
Every session has exactly one opening, written before the agent did anything. Everything else is
partly the session's luck, and clustering on it split one population by its luck: the reactions
to agent errors and asking back are the outcomes of the one to three chances a session gives
(a population asking back in 20% of its answers became "askers" and "non-askers"), abandonment
exists only where the agent erred, the number of turns grows with every error and every thanks,
and the style measured over all turns counts those added turns (terse users who accepted a
refusal with "ok thanks anyway" apart from those who asked "what are your store hours"). Those
are each profile's rates instead (mean over its sessions that had the chance). Populations that
differ only in them are therefore one profile, with the mixed rates: a session shows at most a
few reactions, too few to tell whose they are.

The traits (booleans as 0/1; a missing value, such as the disclosure share of a session
without facts, takes the mean of the sessions that have one) are put in natural units
(`UNITS`: shares as they are, words and polite words scaled to a clear difference), and k-means
(k-means++ seeding, a fixed seed, a few restarts) is run for k = 2..4; the k kept has the best
mean silhouette (computed on at most `SILHOUETTE_SAMPLE` sessions), and the sessions are one
profile unless that silhouette reaches `MIN_SILHOUETTE`. A profile reports the mean and median
of every dimension over its own sessions (None values left out).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from harness.production.behaviour import NUMERIC, SessionBehaviour

MAX_PROFILES = 4
MIN_SILHOUETTE = 0.25  # below it, the sessions are one population
SILHOUETTE_SAMPLE = 2000
RESTARTS = 4
ITERATIONS = 100
# What one unit of difference is on each clustered dimension: a share differs by 1 at most; an
# opening 10 words longer is a clearly different user. A mark one message has or not (a `!`, an
# emoji, a greeting, a please) is one draw of a habit: the same user writes it in one message
# and not the next, so it counts half (two more greetings and pleases are a unit). Not
# standardised: scaling by the spread would make a rare small proxy (typos in a few sessions of
# one population) as decisive as front-loading, and split a population on noise.
UNITS = {
    "opening_words": 10.0,
    "opening_exclamation": 2.0,
    "opening_emoji": 2.0,
    "opening_formality": 2.0,
}
CLUSTERED = (
    "disclosure_first",
    "ambiguous_start",
    *(n for n in NUMERIC if n.startswith("opening_")),
)
OUTCOMES = tuple(n for n in NUMERIC if n not in CLUSTERED)  # each profile's rates and means
TRAIT_FAMILIES = {
    "information": ("disclosure_first", "ambiguous_start"),
    "style": tuple(n for n in CLUSTERED if n.startswith("opening_")),
}
# each family's distance is the root mean square of its traits' differences
WEIGHT_OF = {n: len(names) ** 0.5 for names in TRAIT_FAMILIES.values() for n in names}


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


def _raw(behaviours: Sequence[SessionBehaviour], dimensions: Sequence[str]) -> np.ndarray:
    """Sessions x dimensions as they are (nan: no value)."""
    return np.array(
        [
            [np.nan if (v := getattr(b, n)) is None else float(v) for n in dimensions]
            for b in behaviours
        ],
        dtype=float,
    ).reshape(len(behaviours), len(dimensions))


def means_of(
    behaviours: Sequence[SessionBehaviour], dimensions: Sequence[str] = CLUSTERED
) -> np.ndarray:
    """Each dimension's mean over the sessions that have a value (0 when none has)."""
    raw = _raw(behaviours, dimensions)
    counts = (~np.isnan(raw)).sum(axis=0)
    return np.where(counts > 0, np.nansum(raw, axis=0) / np.maximum(counts, 1), 0.0)


def matrix(
    behaviours: Sequence[SessionBehaviour],
    dimensions: Sequence[str] = CLUSTERED,
    fill: np.ndarray | None = None,
) -> np.ndarray:
    """Sessions x dimensions in `UNITS`, each family weighted once (`WEIGHT_OF`); a missing
    value takes `fill` (by default the dimension's mean over these sessions)."""
    raw = _raw(behaviours, dimensions)
    fill = means_of(behaviours, dimensions) if fill is None else fill
    filled = np.where(np.isnan(raw), fill, raw)
    return filled / np.array([UNITS.get(n, 1.0) * WEIGHT_OF.get(n, 1.0) for n in dimensions])


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


def _largest_first(labels: np.ndarray) -> np.ndarray:
    """The labels renumbered 0, 1, ... from the largest cluster down."""
    order = sorted(set(labels.tolist()), key=lambda c: -(labels == c).sum())
    return np.array([order.index(label) for label in labels.tolist()], dtype=int)


def profiles(behaviours: Sequence[SessionBehaviour], seed: int = 0) -> list[Profile]:
    """The sessions clustered into profiles, largest first, with distinct names."""
    if not behaviours:
        return []
    return _profiles(behaviours, _largest_first(choose_labels(matrix(behaviours), seed)))


def _profiles(behaviours: Sequence[SessionBehaviour], labels: np.ndarray) -> list[Profile]:
    """A profile per label (0, 1, ...), with distinct names."""
    found: list[Profile] = []
    names: dict[str, int] = {}
    for label in range(int(labels.max()) + 1 if len(labels) else 0):
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


# What puts a session, a simulated one included, in a population: how it discloses information.
# That is what a persona's `behaviour:` sets and a simulator plays; the style of the opening is
# real users' own (a rule-based simulator writes fixed phrases, an LLM imitates examples), and
# placed by it every simulated user would land in the population whose openings read most like
# the simulator's phrases.
ASSIGNED = TRAIT_FAMILIES["information"]


@dataclass(frozen=True)
class Populations:
    """Production's profiles as centres of their information traits (`ASSIGNED`), so that any
    session, a production one or a simulated one, can be put in the profile it is nearest to:
    the sim-to-real report compares each production population with the simulated users who
    behave like it, and sees a population no simulated user plays."""

    profiles: list[Profile]  # largest first
    centres: np.ndarray  # profiles x `ASSIGNED`, in `matrix` units
    fill: np.ndarray  # production's mean of each assigned trait, for a session without a value

    def assign(self, behaviours: Sequence[SessionBehaviour]) -> np.ndarray:
        """The index (into `profiles`) of each session's nearest profile centre."""
        if not behaviours:
            return np.zeros(0, dtype=int)
        points = matrix(behaviours, ASSIGNED, self.fill)
        return _distances(points, self.centres).argmin(axis=1)


def populations(behaviours: Sequence[SessionBehaviour], seed: int = 0) -> Populations | None:
    """Production's profiles (clustered as `profiles` clusters them), each holding the
    sessions whose information traits are nearest its centre, as `assign` puts any session;
    profiles whose information traits coincide are one population here. None without
    sessions."""
    if not behaviours:
        return None
    labels = _largest_first(choose_labels(matrix(behaviours), seed))
    fill = means_of(behaviours, ASSIGNED)
    points = matrix(behaviours, ASSIGNED, fill)
    centres = np.array([points[labels == c].mean(axis=0) for c in range(int(labels.max()) + 1)])
    nearest = _distances(points, centres).argmin(axis=1)
    kept = [c for c in range(len(centres)) if (nearest == c).any()]
    centres = centres[kept]
    labels = _largest_first(_distances(points, centres).argmin(axis=1))
    centres = np.array([points[labels == c].mean(axis=0) for c in range(int(labels.max()) + 1)])
    return Populations(_profiles(behaviours, labels), centres, fill)

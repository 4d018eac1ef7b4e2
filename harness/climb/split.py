"""The climb's tasks in two parts: train tasks GEPA reflects on, and held-out tasks a
candidate is accepted on; tasks made from production are split by failure cluster, and the
split is reported as tasks and clusters on each side."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from harness.sim.suite import TaskCase
from harness.specs.climb import Climb, ClimbTasks, Selection
from harness.specs.load import Loaded
from harness.specs.located import SpecError
from harness.specs.task import Provenance


@dataclass
class Split:
    """Task ids reflected on, and held out for acceptance; `clusters` maps each task made from
    production (one with a `source`) to its failure cluster (`failure_mode`)."""

    train: list[str]
    validation: list[str]
    clusters: dict[str, str] = field(default_factory=dict)

    def production_counts(self, side: list[str]) -> tuple[int, int]:
        """(tasks made from production, their clusters) among `side`'s ids."""
        modes = [self.clusters[t] for t in side if t in self.clusters]
        return len(modes), len(set(modes))


def split_tasks(cases: list[TaskCase], spec: ClimbTasks) -> Split:
    """Train and validation ids: as selected, or a seeded random split; hand-written
    regression-tagged tasks always held out. Tasks made from production are all tagged
    regression, yet they are what the flywheel gives the climb to learn from: unless
    `split_production` is off they are split too, stratified by failure cluster."""

    def chosen(selection: Selection, case: TaskCase) -> bool:
        task = case.task
        return (
            task.id in selection.ids
            or bool(set(selection.tags) & set(task.tags))
            or task.level in selection.levels
        )

    sources = {c.task.id: c.task.source for c in cases if from_production(c, spec)}
    held = {c.task.id for c in cases if always_held(c, spec)}
    if spec.train is not None:
        train = [c.task.id for c in cases if chosen(spec.train, c)]
    else:
        pool = [c.task.id for c in cases if c.task.id not in held and c.task.id not in sources]
        shuffled = random.Random(spec.seed).sample(pool, len(pool))
        train = shuffled[: max(1, round(len(pool) * (1 - spec.validation_fraction)))]
        train = sorted(train + production_train(sources, spec))
    train = [t for t in train if t not in held]
    if spec.validation is not None:
        validation = [c.task.id for c in cases if chosen(spec.validation, c) or c.task.id in held]
    else:
        validation = [c.task.id for c in cases if c.task.id not in train]
    clusters = {c.task.id: failure_mode(c.task.source) for c in cases if c.task.source}
    return Split(train, [t for t in validation if t not in train], clusters)


def failure_mode(source: Provenance) -> str:
    """The cluster of a task made from production, as the split stratifies and the climb counts
    them: what went wrong and at which step, the first two parts of its signature (`silent |
    reset_password`, `error | triage`, `feedback | create_ticket(priority=normal)`, `success |
    lookup_user>reset_password`). One task already stands for one signature (its near-duplicate
    sessions), so the whole signature would make every task a cluster of its own; tasks failing
    at the same step with another message or argument are one failure mode, which the climb
    should both learn from and be checked on."""
    return " | ".join(source.signature.split(" | ")[:2])


def from_production(case: TaskCase, spec: ClimbTasks) -> bool:
    """A task `harness traces to-tasks` made (it has a `source`), split like any other task."""
    return spec.split_production and case.task.source is not None


def always_held(case: TaskCase, spec: ClimbTasks) -> bool:
    """A regression-tagged task the climb never reflects on: a hand-written one (or any, when
    production tasks are not split)."""
    tagged = bool(set(case.task.tags) & set(spec.regression_tags))
    return tagged and not from_production(case, spec)


def production_train(sources: dict[str, Provenance | None], spec: ClimbTasks) -> list[str]:
    """The train ids among tasks made from production (id -> `source`), so that each failure
    mode is both learned from and checked on held-out tasks: a cluster (`failure_mode`) of two
    or more tasks has tasks on each side; single-task clusters are split by the seed within
    each kind (failure, success), about `validation_fraction` held out, every kind kept on
    train, and both sides given one when there are two or more."""
    rng = random.Random(spec.seed)
    clusters: dict[str, list[str]] = {}
    kinds: dict[str, str] = {}
    for task_id, source in sources.items():
        if source is not None:
            clusters.setdefault(failure_mode(source), []).append(task_id)
            kinds[task_id] = source.kind
    train: list[str] = []
    singles: dict[str, list[str]] = {}
    for signature in sorted(clusters):
        ids = sorted(clusters[signature])
        if len(ids) == 1:
            singles.setdefault(kinds[ids[0]], []).append(ids[0])
            continue
        rng.shuffle(ids)
        out = min(max(1, _half_up(len(ids) * spec.validation_fraction)), len(ids) - 1)
        train += ids[out:]
    # Rounding the running count keeps the total near the fraction across kinds.
    kept: dict[str, list[str]] = {}
    seen = held = 0
    for kind in sorted(singles):  # "failure" before "success"
        ids = sorted(singles[kind])
        rng.shuffle(ids)
        seen += len(ids)
        out = max(0, min(_half_up(seen * spec.validation_fraction) - held, len(ids) - 1))
        held += out
        kept[kind] = ids[out:]
    if held == 0 and seen >= 2:
        # One task of each kind: hold one out anyway, a success before a failure, since the
        # climb learns from failing transcripts.
        kind = max(sorted(kept), key=lambda k: (len(kept[k]), k == "success"))
        kept[kind].pop()
    return train + [task_id for ids in kept.values() for task_id in ids]


def _half_up(value: float) -> int:
    """`value` rounded, halves up (`round` sends 2.5 to 2)."""
    return int(value + 0.5)


def require_both_sides(split: Split, cases: list[TaskCase], loaded: Loaded[Climb]) -> None:
    """A climb reflects on train tasks and is accepted on held-out ones: with either side
    empty there is nothing to climb, which is bad input, said in one line before GEPA starts
    (GEPA itself fails obscurely on an empty train set)."""
    spec = loaded.spec.tasks
    if not split.validation:
        message = (
            f"0 held-out tasks after the split ({len(cases)} tasks, all train); a candidate "
            "ships only through the gate on held-out tasks: set tasks.validation or add tasks"
        )
        raise SpecError([loaded.problem(("tasks",), message)])
    if split.train:
        return
    tags = " or ".join(spec.regression_tags)
    held = sum(always_held(c, spec) for c in cases)
    if spec.train is not None:
        message = (
            f"0 train tasks: tasks.train selects none of the {len(cases) - held} tasks that "
            "are not always held out"
        )
        message += f" ({held} tagged {tags} are)" if held else ""
        raise SpecError([loaded.problem(("tasks", "train"), message)])
    fixes = ["set tasks.train", f"add tasks not tagged {tags}", "change tasks.regression_tags"]
    if not spec.split_production and any(c.task.source for c in cases):
        fixes.insert(0, "set tasks.split_production: true")
    everything = "all" if held == len(cases) else str(held)
    message = (
        f"0 train tasks after the split ({len(cases)} tasks, {everything} held out: tagged "
        f"{tags}); {', '.join(fixes[:-1])} or {fixes[-1]}"
    )
    raise SpecError([loaded.problem(("tasks",), message)])


def split_text(split: Split, final: bool = False) -> str:
    """How many tasks each side has, and how many of them were made from production in how
    many failure clusters: `9 train, 10 held-out tasks; from production (19 tasks in 15
    clusters): 9 train tasks in 9 clusters, 10 held-out tasks in 10 clusters, 4 clusters on both
    sides` (`final`: as the report says it, `Trained on 9 tasks, held out 10; ...`)."""
    train, held = len(split.train), len(split.validation)
    text = (
        f"Trained on {plural(train, 'task')}, held out {held}"
        if final
        else f"{train} train, {held} held-out tasks"
    )
    if split.clusters:
        whole = _in_clusters((len(split.clusters), len(set(split.clusters.values()))), "")
        train_part = _in_clusters(split.production_counts(split.train), "train")
        held_part = _in_clusters(split.production_counts(split.validation), "held-out")
        text += f"; from production ({whole}): {train_part}, {held_part}"
        both = {split.clusters[t] for t in split.train if t in split.clusters} & {
            split.clusters[t] for t in split.validation if t in split.clusters
        }
        text += f", {plural(len(both), 'cluster')} on both sides" if both else ""
    return text


def plural(n: int, noun: str) -> str:
    """`1 task`, `2 tasks`."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _in_clusters(counts: tuple[int, int], side: str) -> str:
    tasks, clusters = counts
    text = plural(tasks, f"{side} task".strip())
    return f"{text} in {plural(clusters, 'cluster')}" if tasks else text


def split_line(climb_id: str, split: Split) -> str:
    """The progress line of the split (see `split_text`)."""
    return f"climb {climb_id}: {split_text(split)}"


def nothing_to_learn(train: int, trials: int) -> str:
    """Why a climb whose production passes every train task stops, and what to do instead:
    GEPA learns from failing transcripts, and a candidate can only tie production on these
    tasks, so searching would only spend the budget."""
    every = "every train task" + (f" in all {trials} trials" if trials > 1 else "")
    return (
        f"production already passes {every} ({train} of {train}): nothing to learn from, so "
        "the search stopped and no candidate was proposed; give the climb train tasks "
        "production fails: more train tasks (tasks.train, a lower tasks.validation_fraction) "
        "or other tasks (more failing sessions through `harness traces to-tasks`)"
    )

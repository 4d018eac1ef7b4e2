"""Load a suite of tasks as cases ready to play (`load_cases`): each task with its personas
(`personas`), its start state resolved (`start_state`) and every cross-reference checked
(`cross_references`: domains, tool names, state fields), the suite's problems raised together,
so that a run never starts on bad input."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.domains import Environment, UnknownDomain, resolve_domain
from harness.domains.trace_replay import for_state
from harness.imports import UserCodeError, is_reference
from harness.sim.cross_references import bind_domain, check_references
from harness.sim.personas import find_personas_dir, overridden_persona, task_personas
from harness.sim.stamps import files_stamp
from harness.sim.start_state import start_state, starting_from
from harness.specs.agent import AgentVariant
from harness.specs.checks import kind_name
from harness.specs.kinds import kind_of, read_mapping
from harness.specs.load import Loaded, load_task
from harness.specs.located import Location, PathKey, Problem, SpecError, built_once, format_path
from harness.specs.overrides import Override
from harness.specs.persona import Persona, turn_warnings
from harness.specs.references import spec_files
from harness.specs.task import PersonaMix, Task
from harness.specs.validation import first_turn, print_warnings


@dataclass
class TaskCase:
    """A task ready to play: its spec, resolved persona, domain and start state. `state` is
    the resolved start state (files merged, and for a domain with a `State` model, the model's
    dump with defaults applied); the spec's `start` holds the same state, so that everything
    that reads or hashes the task sees one start state however it was written."""

    loaded: Loaded[Task]
    persona: Persona
    domain: type[Environment]
    state: dict[str, Any]
    # a `persona: {mix: ...}`: its personas with their weights (summing to 1), largest first;
    # `persona` is the first of them
    mix: list[tuple[Persona, float]] = dataclasses.field(default_factory=list)

    @property
    def task(self) -> Task:
        return self.loaded.spec

    @property
    def personas(self) -> list[Persona]:
        """Every persona an episode of the task may play."""
        return [p for p, _ in self.mix] if self.mix else [self.persona]

    def persona_of(self, trial: int) -> Persona:
        """The persona of a trial: for a mix, the one whose weight band holds the point
        `task offset + trial x (golden ratio - 1)` (mod 1), a low-discrepancy sequence, so
        that a task's trials and a suite's tasks meet the personas in their shares."""
        if not self.mix:
            return self.persona
        offset = int.from_bytes(hashlib.sha256(self.task.id.encode()).digest()[:8], "big")
        point = (offset / 2**64 + trial * GOLDEN) % 1.0
        reach = 0.0
        for persona, weight in self.mix:
            reach += weight
            if point < reach:
                return persona
        return self.mix[-1][0]


GOLDEN = (5**0.5 - 1) / 2


def task_files(paths: list[Path]) -> list[Path]:
    """The task files among the given files and folders (folders may also hold other kinds)."""
    found = []
    for path in spec_files(paths):
        if path.is_file() and path in paths:
            found.append(path)  # named explicitly: it must be a task
            continue
        data, positions = read_mapping(path)
        if kind_of(path, data, positions) == "task":
            found.append(path)
    return found


def load_cases(
    paths: list[Path],
    personas_dir: Path | None = None,
    overrides: list[Override] | None = None,
    persona_overrides: list[Override] | None = None,
) -> list[TaskCase]:
    """Load and cross-check every task under `paths`; all problems are raised together.
    `overrides` patch every task, `persona_overrides` every persona (e.g. `model=...` to have
    all simulated users played by one model).

    Within one command (`read_once`) a suite is built once: planning, the preflight check and
    the run (and every evaluation of a climb) share it while its files are unchanged."""
    key = (
        "suite",
        tuple(map(str, paths)),
        str(personas_dir),
        tuple(map(repr, overrides or [])),
        tuple(map(repr, persona_overrides or [])),
    )
    cases = built_once(
        key,
        lambda: suite_stamp(paths, personas_dir),
        lambda: _load_cases(task_files(paths), paths, personas_dir, overrides, persona_overrides),
    )
    return list(cases)


def suite_stamp(paths: list[Path], personas_dir: Path | None) -> tuple[Any, ...]:
    """What says a suite's files are unchanged: the size and modification time of each spec
    file under its paths and of each persona file it may use."""
    files = spec_files(paths)
    folders = {personas_dir} if personas_dir else {find_personas_dir(f) for f in _parents(files)}
    listed = [*files, *(p for d in folders if d is not None for p in sorted(d.glob("*.y*ml")))]
    return files_stamp(listed)


def _parents(files: list[Path]) -> list[Path]:
    """One file per folder (the nearest personas folder is the same for all of a folder's)."""
    return list({f.parent: f for f in files}.values())


def _load_cases(
    files: list[Path],
    paths: list[Path],
    personas_dir: Path | None,
    overrides: list[Override] | None,
    persona_overrides: list[Override] | None,
) -> list[TaskCase]:
    problems: list[Problem] = []
    cases: list[TaskCase] = []
    persona_cache: dict[Path, dict[str, Persona]] = {}
    states: dict[str, dict[str, Any]] = {}
    folders: dict[Path, Path | None] = {}  # a task's folder -> its nearest personas folder
    seen_ids: dict[str, Loaded[Task]] = {}
    domains: dict[tuple[str, Path | None], type[Environment]] = {}  # resolved once per domain
    if not files:
        raise SpecError([Problem(Location(", ".join(map(str, paths))), "", "no task files found")])
    for path in files:
        try:
            loaded = load_task(path, overrides)
            task = loaded.spec
            if task.id in seen_ids:
                raise SpecError([duplicate_id(loaded, seen_ids[task.id])])
            seen_ids[task.id] = loaded
            mix = task_personas(loaded, personas_dir, persona_cache, folders)
            if not isinstance(task.persona, Persona):  # persona files: their turns in this task
                for persona, _ in mix:
                    late = turn_warnings(persona, ("persona",), first_turn(task))
                    print_warnings(late, loaded.positions, loaded.path)
            if persona_overrides:  # each problem located at its `--set`
                mix = [(overridden_persona(p, persona_overrides, loaded), w) for p, w in mix]
            # a file reference is relative to the task's folder; a registered name is not
            ref = loaded.spec.domain
            reference = (ref, loaded.path.parent.resolve() if is_reference(ref) else None)
            if reference not in domains:
                domains[reference] = _resolve_domain(loaded)
            domain = domains[reference]
            bound = bind_domain(loaded, domain)
            if bound is not None:
                check_references(loaded, bound)
            state = start_state(loaded, domain, states)
            if bound is None:
                bound = for_state(domain, state)
                check_references(loaded, bound)
            mixed = mix if isinstance(task.persona, PersonaMix) else []
            cases.append(TaskCase(starting_from(loaded, state), mix[0][0], bound, state, mixed))
        except SpecError as exc:
            problems.extend(exc.problems)
    if problems:
        raise SpecError(list(dict.fromkeys(problems)))  # an override's error once, not per task
    return cases


def duplicate_id(loaded: Loaded[Task], first: Loaded[Task]) -> Problem:
    """A task whose id an earlier task of the suite has: results are keyed by task id, so the
    two would be one task in every report and comparison."""
    return loaded.problem(
        ("id",), f"duplicate task id '{loaded.spec.id}' (also in {first.where('id')})"
    )


def _resolve_domain(loaded: Loaded[Task]) -> type[Environment]:
    try:
        return resolve_domain(loaded.spec.domain, loaded.path.parent)
    except UnknownDomain as exc:
        raise SpecError([loaded.problem(("domain",), str(exc))]) from None
    except UserCodeError as exc:  # at the user's file and line: once, however many tasks
        raise SpecError([code_problem(exc)]) from None


def code_problem(exc: UserCodeError) -> Problem:
    """The located problem of the user's module that failed to import."""
    return Problem(Location(exc.source, exc.line, exc.col), "", exc.detail)


def check_variant(variant: Loaded[AgentVariant], cases: list[TaskCase]) -> None:
    """Every tool the variant lists must exist in every domain it will meet, and every check of
    the tasks must observe what the agent shows (a check that cannot is no vacuous pass)."""
    problems = [] if variant.spec.shows_tool_calls else _unobservable(variant.spec, cases)
    domains = {case.domain: case.domain.domain or case.domain.__name__ for case in cases}
    named: list[tuple[PathKey, str]] = [
        (("tools", i), name) for i, name in enumerate(variant.spec.tools)
    ]
    named += [(("tool_descriptions", name), name) for name in variant.spec.tool_descriptions]
    for path, name in named:
        for domain, domain_name in domains.items():
            if name not in domain.tool_names():
                known = ", ".join(domain.tool_names())
                problems.append(
                    Problem(
                        variant.where(*path),
                        format_path(path),
                        f"unknown tool '{name}' in domain '{domain_name}'; known: {known}",
                    )
                )
    if problems:
        raise SpecError(list(dict.fromkeys(problems)))  # replay tasks: one class per tool set


def _unobservable(variant: AgentVariant, cases: list[TaskCase]) -> list[Problem]:
    """A problem for each check that reads tool calls (it names tools) or the state (it names
    state paths) in the tasks of an agent whose tool calls the harness does not see."""
    problems = []
    for case in cases:
        for index, check in enumerate(case.task.checks):
            references = check.references()
            if references.tools:
                reads = "the agent's tool calls"
            elif references.state_paths:
                reads = "the final state, which only the agent's tool calls change"
            else:
                continue
            message = (
                f"this {kind_name(type(check))} check reads {reads}, and agent '{variant.name}' "
                f"(runner {variant.runner}) reports none; have it return the calls it ran as "
                "its reply's `tool_calls` and set `reports_tool_calls: true`, or drop the check"
            )
            problems.append(case.loaded.problem(("checks", index), message))
    return problems

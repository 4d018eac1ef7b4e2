"""Load a suite of tasks with their personas and start states, checking every cross-reference
(persona names, domains, tool names, start states) so that a run never starts on bad input."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from harness.domains import Environment, UnknownDomain, resolve_domain
from harness.domains.trace_replay import for_state, tools_of_state
from harness.imports import is_reference
from harness.models.base import unknown_provider
from harness.sim.env import initial_state
from harness.specs.agent import AgentVariant
from harness.specs.checks import kind_name
from harness.specs.kinds import kind_of, read_mapping
from harness.specs.load import Loaded, load_persona, load_task
from harness.specs.located import (
    Location,
    PathKey,
    Positions,
    Problem,
    SpecError,
    built_once,
    format_path,
    under,
)
from harness.specs.overrides import Override, apply_overrides
from harness.specs.persona import Persona, turn_warnings
from harness.specs.references import json_positions, spec_files
from harness.specs.state_paths import unknown_state_field, wrong_state_values
from harness.specs.task import PersonaMix, Task
from harness.specs.validation import first_turn, print_warnings, suggestion, validate


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


def find_personas_dir(start: Path) -> Path | None:
    """The nearest `personas/` folder in the task's folder or one of its parents."""
    resolved = start.resolve()
    for folder in [resolved.parent, *resolved.parents]:
        if (folder / "personas").is_dir():
            return folder / "personas"
    return None


def load_personas(folder: Path) -> dict[str, Persona]:
    """Every persona file of a folder, by name; within one command (`read_once`), read once
    while its files are unchanged (each task file checked on its own asks for them)."""
    personas = built_once(
        ("personas", str(folder.resolve())),
        lambda: files_stamp(spec_files([folder])),
        lambda: _load_personas(folder),
    )
    return dict(personas)


def check_persona(loaded: Loaded[Persona], at: PathKey = ()) -> Loaded[Persona]:
    """A persona whose model's provider nobody registered is bad input where it is written
    (`at`: where the persona sits in its file), not an error of every episode it plays."""
    unknown = unknown_provider(loaded.spec.model.id)
    if unknown is not None:
        raise SpecError([loaded.problem((*at, "model", "id"), unknown)])
    return loaded


def _load_personas(folder: Path) -> dict[str, Persona]:
    personas: dict[str, Persona] = {}
    problems: list[Problem] = []
    for path in spec_files([folder]):
        try:
            loaded = check_persona(load_persona(path))
        except SpecError as exc:
            problems.extend(exc.problems)
            continue
        name = loaded.spec.name
        if name in personas:
            problems.append(loaded.problem(("name",), f"duplicate persona name '{name}'"))
        personas[name] = loaded.spec
    if problems:
        raise SpecError(problems)
    return personas


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


def load_suite(
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
        lambda: _load_suite(task_files(paths), paths, personas_dir, overrides, persona_overrides),
    )
    return list(cases)


def suite_stamp(paths: list[Path], personas_dir: Path | None) -> tuple[Any, ...]:
    """What says a suite's files are unchanged: the size and modification time of each spec
    file under its paths and of each persona file it may use."""
    files = spec_files(paths)
    folders = {personas_dir} if personas_dir else {find_personas_dir(f) for f in _parents(files)}
    listed = [*files, *(p for d in folders if d is not None for p in sorted(d.glob("*.y*ml")))]
    return files_stamp(listed)


def files_stamp(files: list[Path]) -> tuple[Any, ...]:
    """The name, modification time and size of each file: what says they are unchanged."""
    stats = [(str(f), f.stat()) for f in files]
    return tuple((name, stat.st_mtime_ns, stat.st_size) for name, stat in stats)


def _parents(files: list[Path]) -> list[Path]:
    """One file per folder (the nearest personas folder is the same for all of a folder's)."""
    return list({f.parent: f for f in files}.values())


def _load_suite(
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
            mix = _personas(loaded, personas_dir, persona_cache, folders)
            if not isinstance(task.persona, Persona):  # persona files: their turns in this task
                for persona, _ in mix:
                    late = turn_warnings(persona, ("persona",), first_turn(task))
                    print_warnings(late, loaded.positions, loaded.path)
            if persona_overrides:  # each problem located at its `--set`
                mix = [(_overridden(p, persona_overrides, loaded), w) for p, w in mix]
            # a file reference is relative to the task's folder; a registered name is not
            ref = loaded.spec.domain
            reference = (ref, loaded.path.parent.resolve() if is_reference(ref) else None)
            if reference not in domains:
                domains[reference] = _resolve_domain(loaded)
            domain = domains[reference]
            bound = _bind(loaded, domain)
            if bound is not None:
                _check_references(loaded, bound)
            state = _start_state(loaded, domain, states)
            if bound is None:
                bound = for_state(domain, state)
                _check_references(loaded, bound)
            mixed = mix if isinstance(task.persona, PersonaMix) else []
            cases.append(TaskCase(_starting_from(loaded, state), mix[0][0], bound, state, mixed))
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


def _overridden(persona: Persona, overrides: list[Override], loaded: Loaded[Task]) -> Persona:
    written: dict[PathKey, Location] = {}
    data = apply_overrides(persona.model_dump(mode="json"), overrides, written)
    overridden = validate(Persona, data, written, loaded.path, warn=False)
    return check_persona(Loaded(overridden, loaded.path, written)).spec


def _personas(
    loaded: Loaded[Task],
    personas_dir: Path | None,
    cache: dict[Path, dict[str, Persona]],
    folders: dict[Path, Path | None],
) -> list[tuple[Persona, float]]:
    """The task's persona with weight 1, or its mix's personas with their weights."""
    ref = loaded.spec.persona
    if isinstance(ref, PersonaMix):
        return _mix(loaded, ref)
    return [(_persona(loaded, personas_dir, cache, folders), 1.0)]


def _mix(loaded: Loaded[Task], ref: PersonaMix) -> list[tuple[Persona, float]]:
    """A mix's personas, largest share first, with their shares as weights (normalised;
    equal when no persona has a share)."""
    where = ("persona", "mix")
    start = loaded.path.resolve().parent
    folder = next(
        (base / ref.mix for base in [start, *start.parents] if (base / ref.mix).is_dir()), None
    )
    if folder is None:
        raise SpecError([loaded.problem(where, f"no folder '{ref.mix}' here or above")])
    personas = list(load_personas(folder).values())
    if not personas:
        raise SpecError([loaded.problem(where, f"{folder}: no persona files")])
    shares = [p.share for p in personas]
    if None in shares and any(s is not None for s in shares):
        missing = ", ".join(p.name for p in personas if p.share is None)
        raise SpecError(
            [
                loaded.problem(
                    where,
                    f"{folder}: no share in {missing}: give every persona "
                    "of a mix a share, or none",
                )
            ]
        )
    weights = [1.0 if s is None else s for s in shares]
    total = sum(weights)
    if total <= 0:
        raise SpecError([loaded.problem(where, f"{folder}: the personas' shares are all 0")])
    mix = sorted(zip(personas, (w / total for w in weights), strict=True), key=lambda m: -m[1])
    return mix


def _persona(
    loaded: Loaded[Task],
    personas_dir: Path | None,
    cache: dict[Path, dict[str, Persona]],
    folders: dict[Path, Path | None],
) -> Persona:
    ref = loaded.spec.persona
    if isinstance(ref, Persona):
        check_persona(Loaded(ref, loaded.path, loaded.positions), ("persona",))
        return ref
    assert isinstance(ref, str)
    parent = loaded.path.parent
    if personas_dir is None and parent not in folders:
        folders[parent] = find_personas_dir(loaded.path)
    folder = personas_dir or folders[parent]
    if folder is None:
        raise SpecError(
            [loaded.problem(("persona",), f"unknown persona '{ref}': no personas/ folder")]
        )
    folder = folder.resolve()
    if folder not in cache:
        cache[folder] = load_personas(folder)
    personas = cache[folder]
    if ref not in personas:
        known = ", ".join(sorted(personas)) or "none"
        raise SpecError([loaded.problem(("persona",), f"unknown persona '{ref}'; known: {known}")])
    return personas[ref]


def _resolve_domain(loaded: Loaded[Task]) -> type[Environment]:
    try:
        return resolve_domain(loaded.spec.domain, loaded.path.parent)
    except UnknownDomain as exc:
        raise SpecError([loaded.problem(("domain",), str(exc))]) from None


def _bind(loaded: Loaded[Task], domain: type[Environment]) -> type[Environment] | None:
    """The domain with the tools the task's start state declares (`TraceReplay.for_state`), to
    match the checks against; None while the state cannot be read (its own problem is reported
    when the state is validated)."""
    if not tools_of_state(domain):
        return domain  # its tools are methods, whatever the state
    try:
        return for_state(domain, initial_state(loaded.spec))
    except Exception:
        return None


def _check_references(loaded: Loaded[Task], domain: type[Environment]) -> None:
    """The tools, checker files and state fields the checks name, and the gold actions' tools
    and argument names, must exist in the domain (bound to the task's start state, whose data
    may declare tools)."""
    task = loaded.spec
    known = domain.tool_names()
    problems = [
        loaded.problem(
            ("checks", index, *field), f"unknown tool '{tool}'; known: {', '.join(known)}"
        )
        for index, check in enumerate(task.checks)
        for field, tool in check.references().tools.items()
        if tool not in known
    ]
    problems += [
        loaded.problem(("checks", index, *field), message)
        for index, check in enumerate(task.checks)
        for field, (tool, name) in check.references().tool_parameters.items()
        if (message := _unknown_parameter(domain, tool, name)) is not None
    ]
    problems += [
        loaded.problem(("checks", index, *field), message)
        for index, check in enumerate(task.checks)
        for field, message in check.reference_problems().items()
    ]
    for index, action in enumerate(task.gold_actions):
        where = ("gold_actions", index)
        if action.tool not in known:
            unknown = f"unknown tool '{action.tool}'; known: {', '.join(known)}"
            problems.append(loaded.problem((*where, "tool"), unknown))
            continue
        problems += [
            loaded.problem((*where, "arguments", name), message)
            for name in action.arguments
            if (message := _unknown_parameter(domain, action.tool, name)) is not None
        ]
    if domain.State is not None:
        problems += _state_problems(loaded, domain.State)
        problems += _state_value_problems(loaded, domain.State)
    if problems:
        raise SpecError(sorted(problems, key=lambda p: (p.location.line or 0, p.location.col or 0)))


def _unknown_parameter(domain: type[Environment], tool: str, name: str) -> str | None:
    """Why a check naming the argument `name` of `tool` can never match a call (the tool's
    JSON-schema parameters lack it: `reservation` for `reservation_id`), or None. A tool whose
    schema allows other parameters is not judged, nor an unknown tool (reported as such)."""
    if tool not in domain.tool_names():
        return None
    [spec] = domain.tool_specs([tool])
    properties = spec.parameters.get("properties", {})
    closed = spec.parameters.get("additionalProperties") is False
    if not closed or not isinstance(properties, dict) or name in properties:
        return None
    if not properties:
        return f"tool '{tool}' takes no parameters, found '{name}'"
    return f"unknown parameter '{name}' of tool '{tool}'; {suggestion(name, list(properties))}"


def _state_problems(loaded: Loaded[Task], model: type[BaseModel]) -> list[Problem]:
    """A problem for each state path of a check that names a field the state model lacks; a
    path under one already reported (a nested key of a misspelt one) is not reported again."""
    problems = []
    for index, check in enumerate(loaded.spec.checks):
        paths = check.references().state_paths
        wrong: list[PathKey] = []
        for field in sorted(paths, key=len):
            if any(field[: len(w)] == w for w in wrong):
                continue
            message = unknown_state_field(model, paths[field])
            if message is not None:
                wrong.append(field)
                problems.append(loaded.problem(("checks", index, *field), message))
    return problems


def _state_value_problems(loaded: Loaded[Task], model: type[BaseModel]) -> list[Problem]:
    """A problem for each value a check expects of the state that the state model's field
    refuses (`wrong_state_values`): such a check could never pass, whatever the agent did."""
    return [
        loaded.problem(("checks", index, *field, *keys), message)
        for index, check in enumerate(loaded.spec.checks)
        for field, (path, expected) in check.references().state_values.items()
        for keys, message in wrong_state_values(model, path, expected)
    ]


def _start_state(
    loaded: Loaded[Task], domain: type[Environment], states: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The merged start state, validated against the domain's state model. Tasks that start
    from the same files and inline state share one, within a command (validated once; never
    changed: an environment copies the state it is given)."""
    start = loaded.spec.start
    key = json.dumps(
        [id(domain), start.state_file, start.state_db, start.state],
        sort_keys=True,
        default=str,
    )
    if key in states:
        return states[key]
    files = [Path(f) for f in (start.state_file, start.state_db) if f]
    states[key] = state = built_once(  # and once per command, for `validate` of file by file
        ("start-state", key),
        lambda: files_stamp([f for f in files if f.exists()]),
        lambda: _merged_state(loaded, domain),
    )
    return state


def _starting_from(loaded: Loaded[Task], state: dict[str, Any]) -> Loaded[Task]:
    """The task with its resolved start state as its whole `start.state` (no files left to
    merge), so that a task that writes a default and one that leaves it out are one task."""
    task = loaded.spec
    start = task.start.model_copy(update={"state": state, "state_file": None, "state_db": None})
    return Loaded(task.model_copy(update={"start": start}), loaded.path, loaded.positions)


def _merged_state(loaded: Loaded[Task], domain: type[Environment]) -> dict[str, Any]:
    """The merged start state; for a domain with a `State` model, the validated model's JSON
    dump: defaults applied, so a tool may read every field the model declares (a domain
    without one keeps the merged data as it is)."""
    try:
        state = initial_state(loaded.spec, shared=domain.State is not None)  # validated: a copy
    except sqlite3.DatabaseError as exc:
        problem = loaded.problem(("start", "state_db"), f"unreadable snapshot: {exc}")
        raise SpecError([problem]) from None
    if domain.State is None:
        return state
    start = loaded.spec.start
    source = Path(start.state_file) if start.state_file else loaded.path
    try:
        model = validate(domain.State, state, _state_positions(loaded), source)
    except SpecError as exc:
        raise SpecError(
            [
                Problem(p.location, f"start.state.{p.path}".rstrip("."), p.message)
                for p in exc.problems
            ]
        ) from None
    return model.model_dump(mode="json", by_alias=True)  # by alias: it validates again as is


def _state_positions(loaded: Loaded[Task]) -> Positions:
    """Where each value of the merged start state was written, found only for a problem: the
    task's inline `start.state` over its JSON state file (its line and column, not its start).
    With a snapshot (`state_db`) between them, a value not written inline may be the
    snapshot's, so the state file's positions are not used."""
    inline = under(loaded.positions, ("start", "state"))
    start = loaded.spec.start
    if not start.state_file or start.state_db:
        return inline
    in_file = json_positions(Path(start.state_file))
    return Positions(lambda: {**in_file, **inline})


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

"""A task's personas found and loaded: its persona file by name from the nearest `personas/`
folder, an inline persona, or a mix's folder of personas with their shares; every persona
checked where it is written (its model's provider, a `--set` on it), before a run starts."""

from __future__ import annotations

from pathlib import Path

from harness.models.base import unknown_provider
from harness.sim.stamps import files_stamp
from harness.specs.load import Loaded, load_persona
from harness.specs.located import Location, PathKey, Problem, SpecError, built_once
from harness.specs.overrides import Override, apply_overrides
from harness.specs.persona import Persona, misspelt_facts
from harness.specs.references import spec_files
from harness.specs.task import PersonaMix, Task
from harness.specs.validation import validate


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
    return {name: loaded.spec for name, loaded in loaded_personas(folder).items()}


def loaded_personas(folder: Path) -> dict[str, Loaded[Persona]]:
    """`load_personas` with each persona's file and positions, to point at a line of it."""
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


def _load_personas(folder: Path) -> dict[str, Loaded[Persona]]:
    personas: dict[str, Loaded[Persona]] = {}
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
        personas[name] = loaded
    if problems:
        raise SpecError(problems)
    return personas


def task_personas(
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
    sources = loaded_personas(folder)
    personas = [source.spec for source in sources.values()]
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
    check_facts(loaded, [sources[persona.name] for persona, _ in mix])
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
        check_facts(loaded, [Loaded(ref, loaded.path, loaded.positions)], ("persona",))
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
    if misspelt_facts(personas[ref], loaded.spec.scenario.known_info):  # its file's lines
        check_facts(loaded, [loaded_personas(folder)[ref]])
    return personas[ref]


def check_facts(loaded: Loaded[Task], personas: list[Loaded[Persona]], at: PathKey = ()) -> None:
    """The task's scripted personas must not read a fact its scenario nearly has under another
    name (`{known.nme}` for `name`: `misspelt_facts`), a rule that would silently never fire;
    each problem is located in the persona's file (`at`: where the persona sits in it), one
    line for all the tasks whose facts it misreads alike."""
    known = loaded.spec.scenario.known_info
    problems = [
        persona.problem((*at, *keys), message)
        for persona in personas
        for keys, message in misspelt_facts(persona.spec, known)
    ]
    if problems:
        raise SpecError(problems)


def overridden_persona(
    persona: Persona, overrides: list[Override], loaded: Loaded[Task]
) -> Persona:
    written: dict[PathKey, Location] = {}
    data = apply_overrides(persona.model_dump(mode="json"), overrides, written)
    overridden = validate(Persona, data, written, loaded.path, warn=False)
    return check_persona(Loaded(overridden, loaded.path, written)).spec

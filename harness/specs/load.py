"""Read spec files: YAML with line-numbered errors, `extends:` chains and `--set` overrides.

Every problem becomes one line `file:line:col: field.path: message`; all problems of a file are
reported together in one `SpecError`.
"""

from __future__ import annotations

import copy
import difflib
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from harness.specs.agent import AgentVariant
from harness.specs.dag import Dag
from harness.specs.gate import Gate
from harness.specs.persona import Persona
from harness.specs.script import Script
from harness.specs.task import Task

KINDS: dict[str, type[BaseModel]] = {
    "task": Task,
    "persona": Persona,
    "agent": AgentVariant,
    "dag": Dag,
    "gate": Gate,
    "script": Script,
}
YAML_SUFFIXES = (".yaml", ".yml")

PathKey = tuple[str | int, ...]
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Location:
    """Where a value was written: a file position, or a `--set` override."""

    source: str
    line: int | None = None
    col: int | None = None

    def __str__(self) -> str:
        if self.line is None:
            return self.source
        return f"{self.source}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Problem:
    """One located error."""

    location: Location
    path: str
    message: str

    def __str__(self) -> str:
        return (
            f"{self.location}: {self.path}: {self.message}"
            if self.path
            else (f"{self.location}: {self.message}")
        )


class SpecError(Exception):
    """One or more located problems in user input. The CLI prints them and exits with 2."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))

    @classmethod
    def at(cls, location: Location, path: str, message: str) -> SpecError:
        return cls([Problem(location, path, message)])


@dataclass
class Loaded(Generic[M]):
    """A validated spec with the positions of its values, for cross-reference errors later."""

    spec: M
    path: Path
    positions: dict[PathKey, Location] = field(default_factory=dict)

    def where(self, *keys: str | int) -> Location:
        """The location of a value, or of its nearest written parent."""
        return _nearest(self.positions, keys, Location(display(self.path), 1, 1))

    def problem(self, keys: PathKey, message: str) -> Problem:
        return Problem(self.where(*keys), format_path(keys), message)


# ---------------------------------------------------------------- YAML with positions


class _Loader(yaml.SafeLoader):
    """A safe loader; positions are read off the composed node tree."""


def display(path: Path) -> str:
    """A path as the user would write it: relative to the working folder when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def read_yaml(path: Path) -> tuple[Any, dict[PathKey, Location]]:
    """Parse a YAML file, returning the data and the position of every key and list item."""
    source = display(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError.at(Location(source), "", "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError.at(Location(source), "", f"cannot read file: {exc}") from None
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        positions: dict[PathKey, Location] = {}
        data = _construct(node, (), positions, loader, source) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        message = str(exc.problem or exc.context)
        if exc.context and exc.problem and exc.context_mark:
            message += f" ({exc.context} at line {exc.context_mark.line + 1})"
        raise SpecError.at(Location(source, line, col), "", f"invalid YAML: {message}") from None
    except yaml.YAMLError as exc:
        raise SpecError.at(Location(source), "", f"invalid YAML: {exc}") from None
    finally:
        loader.dispose()
    return data, positions


def _construct(
    node: yaml.Node, path: PathKey, positions: dict[PathKey, Location], loader: _Loader, src: str
) -> Any:
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            here = Location(src, key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if not isinstance(key, str | int | bool | float) or key is None:
                raise SpecError.at(here, format_path(path), "mapping keys must be plain scalars")
            if key in result:
                raise SpecError.at(here, format_path((*path, key)), f"duplicate key '{key}'")
            positions[(*path, key)] = here
            result[key] = _construct(value_node, (*path, key), positions, loader, src)
        return result
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item in enumerate(node.value):
            mark = item.start_mark
            positions[(*path, index)] = Location(src, mark.line + 1, mark.column + 1)
            items.append(_construct(item, (*path, index), positions, loader, src))
        return items
    return loader.construct_object(node, deep=True)


# ---------------------------------------------------------------- validation errors


def format_path(keys: PathKey) -> str:
    """`('checks', 0, 'expect')` -> `checks[0].expect`."""
    text = ""
    for key in keys:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else str(key))
    return text


def _nearest(positions: dict[PathKey, Location], keys: PathKey, default: Location) -> Location:
    for end in range(len(keys), 0, -1):
        if keys[:end] in positions:
            return positions[keys[:end]]
    return default


def _data_path(data: Any, loc: tuple[Any, ...]) -> PathKey:
    """Map a pydantic error location onto keys of the data, dropping union tags."""
    keys: list[str | int] = []
    current = data
    for part in loc:
        if (isinstance(current, dict) and part in current) or (
            isinstance(current, list) and isinstance(part, int) and part < len(current)
        ):
            current = current[part]
        elif part == "[key]" or _is_union_tag(current, part):
            continue
        else:  # a missing field: name it; its parent carries the position
            current = None
        keys.append(part)
    return tuple(keys)


def _is_union_tag(current: Any, part: Any) -> bool:
    """Whether pydantic added `part` to a location as a union tag rather than a field name."""
    return isinstance(current, dict) and part in (current.get("kind"), "inline")


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str] | None:
    """The field names of the model found at a pydantic error location, for 'did you mean'."""
    current: Any = model
    for part in loc:
        current = _step(current, part)
        if current is None:
            return None
    if not _is_model(current):
        return None
    return [info.alias or name for name, info in current.model_fields.items()]


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _step(tp: Any, part: Any) -> Any:
    tp = _unwrap(tp)
    if _is_model(tp):
        info = tp.model_fields.get(part) or next(
            (f for f in tp.model_fields.values() if f.alias == part), None
        )
        return info.annotation if info else None
    options = _union_members(tp)
    if options:
        for option in options:
            option = _unwrap(option)
            if _is_model(option) and _literal_kind(option) == part:
                return option
        models = [o for o in map(_unwrap, options) if _is_model(o)]
        return _step(models[0], part) if len(models) == 1 else None
    origin = typing.get_origin(tp)
    if origin in (list, tuple) and isinstance(part, int):
        return typing.get_args(tp)[0]
    if origin is dict:
        return typing.get_args(tp)[1]
    return None


def _unwrap(tp: Any) -> Any:
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _union_members(tp: Any) -> tuple[Any, ...]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return typing.get_args(tp)
    return ()


def _literal_kind(model: type[BaseModel]) -> Any:
    info = model.model_fields.get("kind")
    if info is None or typing.get_origin(info.annotation) is not typing.Literal:
        return None
    return typing.get_args(info.annotation)[0]


def _message(error: Any, model: type[BaseModel]) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        unknown = str(error["loc"][-1])
        allowed = _fields_at(model, tuple(error["loc"][:-1])) or []
        close = difflib.get_close_matches(unknown, allowed, n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"expected one of: {', '.join(allowed)}"
        return f"unknown field '{unknown}'; {hint}" if allowed else f"unknown field '{unknown}'"
    if kind == "missing":
        return "required field is missing"
    if kind == "union_tag_invalid":
        ctx = error["ctx"]
        field, expected = ctx["discriminator"].strip("'"), ctx["expected_tags"].replace("'", "")
        return f"unknown {field} '{ctx['tag']}'; expected one of: {expected}"
    message = str(error["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    found = error.get("input")
    if kind != "value_error" and isinstance(found, str | int | float | bool) and found != "":
        message += f", found {found!r}"
    return message


def validate(
    model: type[M],
    data: Any,
    positions: dict[PathKey, Location],
    source: Path,
) -> M:
    """Validate data against a spec model, turning every error into a located one-line problem."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        default = Location(display(source), 1, 1)
        problems = []
        for error in exc.errors():
            keys = _data_path(data, tuple(error["loc"]))
            problems.append(
                Problem(
                    _nearest(positions, keys, default), format_path(keys), _message(error, model)
                )
            )
        problems.sort(key=lambda p: (p.location.line or 0, p.location.col or 0))
        raise SpecError(problems) from None


# ---------------------------------------------------------------- overrides and merging


def deep_merge(base: Any, override: Any) -> Any:
    """Merge mappings recursively; anything else in `override` replaces; None deletes a key."""
    if not isinstance(base, dict) or not isinstance(override, dict):
        return copy.deepcopy(override)
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if value is None:
            merged.pop(key, None)
        elif key in merged:
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


@dataclass(frozen=True)
class Override:
    """One `--set KEY.PATH=VALUE`: the text as the user typed it, and what it sets."""

    text: str
    keys: PathKey
    value: Any

    @classmethod
    def parse(cls, text: str) -> Override:
        """Parse `a.b.0.c=value`; the value is read as YAML (`3` is a number, `[a]` a list)."""
        key_text, sep, value_text = text.partition("=")
        if not sep or not key_text.strip() or "" in key_text.strip().split("."):
            raise SpecError.at(Location(f"--set {text}"), "", "expected KEY.PATH=VALUE")
        try:
            value = yaml.safe_load(value_text) if value_text.strip() else ""
        except yaml.YAMLError:
            value = value_text
        keys = tuple(int(k) if k.isdigit() else k for k in key_text.strip().split("."))
        return cls(text, keys, value)

    def scoped(self) -> tuple[str | int, Override]:
        """Split off the first key (a scope such as `agent` or a DAG node id)."""
        return self.keys[0], Override(self.text, self.keys[1:], self.value)

    @classmethod
    def parse_in(cls, text: str, scope: str) -> Override:
        """Parse an override that may be written with its scope (`agent.model=...`) or
        without it (`model=...`); errors still quote the text as written."""
        override = cls.parse(text)
        if override.keys[0] == scope and len(override.keys) > 1:
            return override.scoped()[1]
        return override


def apply_overrides(
    data: dict[str, Any], overrides: list[Override], positions: dict[PathKey, Location]
) -> dict[str, Any]:
    """Apply overrides to a copy of `data`; each becomes the location of the values it wrote."""
    data = copy.deepcopy(data)
    for override in overrides:
        where, keys = Location(f"--set {override.text}"), override.keys
        if not keys:
            raise SpecError.at(where, "", "expected KEY.PATH=VALUE")
        parent: Any = data
        for depth, key in enumerate(keys[:-1]):
            parent = _child(parent, key, keys[: depth + 1], where)
        last = keys[-1]
        in_list = isinstance(parent, list) and isinstance(last, int) and last < len(parent)
        if in_list or isinstance(parent, dict):
            parent[last] = override.value
        elif isinstance(parent, list):
            raise SpecError.at(where, format_path(keys), "no such list item")
        else:
            kind = type(parent).__name__
            raise SpecError.at(where, format_path(keys), f"cannot set a field inside a {kind}")
        for path in [p for p in positions if p[: len(keys)] == keys]:
            del positions[path]
        for depth in range(1, len(keys) + 1):
            positions.setdefault(keys[:depth], where)
    return data


def _child(parent: Any, key: str | int, path: PathKey, where: Location) -> Any:
    if isinstance(parent, dict):
        if key not in parent or parent[key] is None:
            parent[key] = {}
        return parent[key]
    if isinstance(parent, list) and isinstance(key, int) and key < len(parent):
        return parent[key]
    kind = type(parent).__name__
    raise SpecError.at(where, format_path(path), f"cannot set a field inside a {kind}")


# ---------------------------------------------------------------- files of each kind


def read_mapping(path: Path) -> tuple[dict[str, Any], dict[PathKey, Location]]:
    """Read a YAML file that must hold a mapping."""
    data, positions = read_yaml(path)
    if not isinstance(data, dict):
        found = "an empty file" if data is None else f"a {type(data).__name__}"
        kinds = ", ".join(KINDS)
        raise SpecError.at(
            Location(display(path), 1, 1),
            "",
            f"expected a mapping with 'kind: {{{kinds}}}', found {found}",
        )
    return data, positions


def kind_of(path: Path, data: dict[str, Any], positions: dict[PathKey, Location]) -> str:
    """The file's `kind:`, checked against the known kinds."""
    kind = data.get("kind")
    if kind not in KINDS:
        where = positions.get(("kind",), Location(display(path), 1, 1))
        expected = ", ".join(KINDS)
        found = "missing" if kind is None else f"'{kind}' is unknown"
        raise SpecError.at(where, "kind", f"{found}; expected one of: {expected}")
    return kind


def load_spec(path: Path, overrides: list[Override] | None = None) -> Loaded[BaseModel]:
    """Load any spec file, choosing the model from its `kind:`."""
    data, positions = read_mapping(path)
    kind = kind_of(path, data, positions)
    loader = {"agent": load_agent, "task": load_task, "script": load_script}.get(kind)
    if loader is not None:
        return loader(path, overrides)
    data = apply_overrides(data, overrides or [], positions)
    return Loaded(validate(KINDS[kind], data, positions, path), path, positions)


def _expect_kind(
    path: Path, data: dict[str, Any], positions: dict[PathKey, Location], kind: str
) -> None:
    found = kind_of(path, data, positions)
    if found != kind:
        where = positions.get(("kind",), Location(display(path), 1, 1))
        raise SpecError.at(where, "kind", f"expected a '{kind}' file, found '{found}'")


def _relative_file(
    base: Path, data: dict[str, Any], keys: PathKey, positions: dict[PathKey, Location]
) -> None:
    """Resolve a relative file reference in place, against the file that wrote it."""
    parent: Any = data
    for key in keys[:-1]:
        if isinstance(parent, list) and isinstance(key, int) and key < len(parent):
            parent = parent[key]
        else:
            parent = parent.get(key) if isinstance(parent, dict) else None
    if not isinstance(parent, dict) or not isinstance(parent.get(keys[-1]), str):
        return
    reference, suffix = parent[keys[-1]], ""
    if keys[-1] == "entry":  # 'file.py:function' names a file; 'package.module:function' does not
        reference, _, function = reference.rpartition(":")
        if not reference.endswith(".py"):
            return
        suffix = f":{function}"
    target = (base.parent / reference).resolve()
    if not target.is_file():
        where = _nearest(positions, keys, Location(display(base), 1, 1))
        raise SpecError.at(where, format_path(keys), f"file not found: {display(target)}")
    parent[keys[-1]] = f"{target}{suffix}"


def load_agent(path: Path, overrides: list[Override] | None = None) -> Loaded[AgentVariant]:
    """Load an agent variant, resolving its `extends:` chain (child values win)."""
    chain: list[tuple[dict[str, Any], dict[PathKey, Location]]] = []
    seen: list[Path] = []
    current: Path | None = path
    while current is not None:
        if current.resolve() in seen:
            cycle = " -> ".join(display(p) for p in [*seen, current.resolve()])
            where = chain[-1][1].get(("extends",), Location(display(seen[-1]), 1, 1))
            raise SpecError.at(where, "extends", f"cycle: {cycle}")
        seen.append(current.resolve())
        data, positions = read_mapping(current)
        _expect_kind(current, data, positions, "agent")
        for keys in (("model", "script"), ("extends",), ("entry",)):
            _relative_file(current, data, keys, positions)
        chain.append((data, positions))
        parent = data.get("extends")
        current = Path(parent) if isinstance(parent, str) else None

    merged: dict[str, Any] = {}
    merged_positions: dict[PathKey, Location] = {}
    for data, positions in reversed(chain):
        merged = deep_merge(merged, data)
        merged_positions.update(positions)
    merged["extends"] = chain[0][0].get("extends")
    merged = apply_overrides(merged, overrides or [], merged_positions)
    return Loaded(validate(AgentVariant, merged, merged_positions, path), path, merged_positions)


def load_task(path: Path, overrides: list[Override] | None = None) -> Loaded[Task]:
    """Load a task; files it names (start state, checker code) are resolved against it, and a
    state file must be JSON."""
    data, positions = read_mapping(path)
    _expect_kind(path, data, positions, "task")
    data = apply_overrides(data, overrides or [], positions)
    checks = data.get("checks") if isinstance(data.get("checks"), list) else []
    file_keys = [("start", "state_file"), ("start", "state_db")]
    file_keys += [
        ("checks", i, "file") for i, check in enumerate(checks) if isinstance(check, dict)
    ]
    for keys in file_keys:
        _relative_file(path, data, keys, positions)
    task = validate(Task, data, positions, path)
    if task.start.state_file:
        read_json(Path(task.start.state_file))
    return Loaded(task, path, positions)


def load_script(path: Path, overrides: list[Override] | None = None) -> Loaded[Script]:
    """Load the rules file of a `scripted` model."""
    data, positions = read_mapping(path)
    _expect_kind(path, data, positions, "script")
    data = apply_overrides(data, overrides or [], positions)
    return Loaded(validate(Script, data, positions, path), path, positions)


def load_persona(path: Path) -> Loaded[Persona]:
    """Load a persona file."""
    data, positions = read_mapping(path)
    _expect_kind(path, data, positions, "persona")
    return Loaded(validate(Persona, data, positions, path), path, positions)


def read_json(path: Path) -> Any:
    """Read a JSON data file, with the same located errors as YAML."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError.at(Location(display(path)), "", "file not found") from None
    except json.JSONDecodeError as exc:
        where = Location(display(path), exc.lineno, exc.colno)
        raise SpecError.at(where, "", f"invalid JSON: {exc.msg}") from None


def spec_files(paths: list[Path]) -> list[Path]:
    """Expand files and folders into the YAML files they hold, sorted, without duplicates."""
    found: dict[Path, None] = {}
    for path in paths:
        if path.is_dir():
            for file in sorted(path.rglob("*")):
                if file.suffix in YAML_SUFFIXES and file.is_file():
                    found.setdefault(file, None)
        elif path.exists():
            found.setdefault(path, None)
        else:
            raise SpecError.at(Location(display(path)), "", "no such file or folder")
    return list(found)


def json_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of a spec kind, for editor autocompletion."""
    if kind not in KINDS:
        raise SpecError.at(
            Location("schema"), "", f"unknown kind '{kind}'; expected one of: " + ", ".join(KINDS)
        )
    schema = KINDS[kind].model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema

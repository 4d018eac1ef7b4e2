"""The optional project file: `harness.yaml` at the project's root, or `[tool.harness]` in its
pyproject.toml. Its `plugins:` list names local modules (`my_domain`, `plugins/checks.py`) that
register domains, check kinds, providers or node kinds for every command run in the project.

Its optional `judge_model:` (a model id, or a mapping like `{id: openai/gpt-4.1-mini, base_url:
...}`; a scripted judge's `script` is relative to the project file) is the judge of every
`llm_judge` check that names no model, wherever no `--judge-model` or DAG/climb `judge_model`
says otherwise. There is no built-in judge: a weak one would only turn verdicts into errors, so
a run whose tasks need a judge and find none stops before it plays anything."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROJECT_FILE = "harness.yaml"


class ProjectError(ValueError):
    """An unreadable project file or a plug-in that does not import; names the file."""


@dataclass
class Project:
    """What the project file says, and where it is."""

    root: Path
    source: Path | None = None
    plugins: list[str] = field(default_factory=list)
    judge_model: str | dict[str, Any] | None = None  # as written; a `script` made absolute


_start: Path | None = None
"""Where this process looks for its project when a caller names no folder: the working folder,
unless a command was given files of a project the working folder is not in (`use_project_of`)."""
_searched: Path | None = None  # the folder of a command's files, when searched too


def find_project(start: Path | None = None) -> Project:
    """The project of the current folder: the nearest folder (upwards) with `harness.yaml` or a
    pyproject.toml that has a `[tool.harness]` table; the current folder when there is none."""
    here = (start or _start or Path.cwd()).resolve()
    for folder in [here, *here.parents]:
        if (folder / PROJECT_FILE).is_file():
            return _from_yaml(folder / PROJECT_FILE)
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            table = _tool_table(pyproject)
            if table is not None:
                return _project(pyproject, table)
    return Project(root=here)


def _from_yaml(path: Path) -> Project:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ProjectError(f"{path}: not valid YAML: {exc}") from None
    return _project(path, data)


def _tool_table(path: Path) -> dict[str, Any] | None:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ProjectError(f"{path}: not valid TOML: {exc}") from None
    table = data.get("tool", {}).get("harness")
    return table if isinstance(table, dict) else None


def _project(path: Path, data: Any) -> Project:
    if not isinstance(data, dict):
        raise ProjectError(f"{path}: expected a mapping with 'plugins:' or 'judge_model:'")
    plugins = data.get("plugins", [])
    if not isinstance(plugins, list) or not all(isinstance(p, str) for p in plugins):
        raise ProjectError(f"{path}: plugins: expected a list of module names or .py files")
    unknown = sorted(set(data) - {"plugins", "judge_model"})
    if unknown:
        raise ProjectError(f"{path}: unknown key '{unknown[0]}'; known: judge_model, plugins")
    judge = _judge_model(path, data.get("judge_model"))
    return Project(root=path.parent, source=path, plugins=plugins, judge_model=judge)


def _judge_model(path: Path, value: Any) -> str | dict[str, Any] | None:
    """The judge as written (checked further where it is used, as any model reference), with a
    scripted judge's rules file found from the project file, like its plug-ins."""
    if value is None or (isinstance(value, str) and value):
        return value
    if not isinstance(value, dict) or not isinstance(value.get("id"), str):
        raise ProjectError(
            f"{path}: judge_model: expected a model id or a mapping with 'id:' "
            "(e.g. openai/gpt-4.1-mini)"
        )
    script = value.get("script")
    if isinstance(script, str) and not Path(script).is_absolute():
        value = {**value, "script": str(path.parent / script)}
    return value


def use_project_of(path: Path | None) -> None:
    """Look for this process's project upward from `path` (the first task path, or the DAG,
    climb or agent file a command was given) when the working folder has no project file, as
    git finds its repository: `harness run-eval --tasks ../proj/tasks ...` run from a parent or
    sibling folder loads `../proj/harness.yaml` and its plug-ins. Called at the start of each
    command (None: the working folder's only), before a registry loads the plug-ins."""
    global _start, _searched
    _start = _searched = None
    if path is None or find_project(Path.cwd()).source is not None:
        return
    try:
        path = path.resolve()
    except (OSError, RuntimeError):  # a symlink loop: the command's own read reports it
        return
    _searched = path if path.is_dir() else path.parent
    if find_project(_searched).source is not None:
        _start = _searched


def _shown(path: Path) -> Path:
    """A path relative to the working folder when inside it (`specs.located.display`, which
    this core module cannot import without a cycle through the registry)."""
    resolved, cwd = path.resolve(), Path.cwd().resolve()
    return resolved.relative_to(cwd) if resolved.is_relative_to(cwd) else resolved


def where_looked() -> str:
    """Which project file was read and its plug-ins, or where none was found: for a message
    about a name that nothing registered, which a plug-in of some project may define."""
    project = find_project()
    if project.source is not None:
        plugins = ", ".join(project.plugins) or "none"
        return f"read project file {_shown(project.source)} (plugins: {plugins})"
    cwd = Path.cwd().resolve()
    if _searched is None:
        folders = "the working folder or any folder above it"
    elif _searched.is_relative_to(cwd):  # the working folder is above it
        folders = f"{_shown(_searched)} or any folder above it"
    else:
        folders = f"the working folder, {_shown(_searched)}, or any folder above them"
    return f"no project file ({PROJECT_FILE}, or [tool.harness] in pyproject.toml) in {folders}"


_loaded = False


def load_plugins(start: Path | None = None) -> None:
    """Import the project's plug-ins, once per process (registries call this on first use)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    project = find_project(start)
    from harness.imports import UnresolvedReference, UserCodeError, import_module

    for plugin in project.plugins:
        try:
            import_module(plugin, project.root)
        except UserCodeError:
            _loaded = False  # the next lookup says it again, rather than missing the plug-in
            raise  # located in the plug-in's own file, where the fix is
        except UnresolvedReference as exc:
            _loaded = False
            raise ProjectError(f"{project.source}: plugins: {exc}") from None

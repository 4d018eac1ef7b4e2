"""The optional project file: `harness.yaml` at the project's root, or `[tool.harness]` in its
pyproject.toml. Its `plugins:` list names local modules (`my_domain`, `plugins/checks.py`) that
register domains, check kinds, providers or node kinds for every command run in the project."""

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


def find_project(start: Path | None = None) -> Project:
    """The project of the current folder: the nearest folder (upwards) with `harness.yaml` or a
    pyproject.toml that has a `[tool.harness]` table; the current folder when there is none."""
    here = (start or Path.cwd()).resolve()
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
        raise ProjectError(f"{path}: expected a mapping with 'plugins:'")
    plugins = data.get("plugins", [])
    if not isinstance(plugins, list) or not all(isinstance(p, str) for p in plugins):
        raise ProjectError(f"{path}: plugins: expected a list of module names or .py files")
    unknown = sorted(set(data) - {"plugins"})
    if unknown:
        raise ProjectError(f"{path}: unknown key '{unknown[0]}'; known: plugins")
    return Project(root=path.parent, source=path, plugins=plugins)


_loaded = False


def load_plugins(start: Path | None = None) -> None:
    """Import the project's plug-ins, once per process (registries call this on first use)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    project = find_project(start)
    from harness.imports import UnresolvedReference, import_module

    for plugin in project.plugins:
        try:
            import_module(plugin, project.root)
        except UnresolvedReference as exc:
            raise ProjectError(f"{project.source}: plugins: {exc}") from None

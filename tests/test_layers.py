"""Imports follow the layers of docs/architecture.md: a module never imports a higher layer,
and no two packages of the harness import each other (directly or round a longer cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

from tests.conftest import ROOT

# Lowest first. A module may import its own layer and the ones below it.
LAYERS: list[set[str]] = [
    {
        "transcript",
        "specs",
        "stats",
        "defaults",
        "registry",
        "secrets",
        "matching",
        "sqlite",
        "store_location",
        "jsontext",
        "outcomes",
        "reactions",
        "options",
        "imports",
        "project",
        "state_diff",
    },
    {"tracing"},
    {"models", "domains", "testing"},
    {"sim", "grading", "production", "traces", "sdk"},  # traces: production's deprecated name
    {"store"},
    {"engine", "compare", "gate", "report", "fidelity"},
    {"api"},
    {"pipeline", "climb", "scaffold", "view"},
    {"cli", "__main__"},
]
LAYER_OF = {unit: index for index, units in enumerate(LAYERS) for unit in units}
PACKAGE = ROOT / "harness"


def unit_of(module: str) -> str:
    """`harness.sim.episode` -> `sim`: the package or top-level module a module belongs to."""
    return module.split(".")[1] if "." in module else module


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def harness_imports(path: Path) -> list[tuple[int, str]]:
    """Every `harness.*` module a file imports, at any depth (function-local imports count)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [(node.lineno, name) for name in names if name.startswith("harness.")]
    return found


def edges() -> list[tuple[str, str, str]]:
    """(importing unit, imported unit, where) for imports that cross units."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = unit_of(module_name(path))
        for line, name in harness_imports(path):
            target = unit_of(name)
            if target != source:
                found.append((source, target, f"{path.relative_to(ROOT)}:{line} imports {name}"))
    return found


def test_every_unit_has_a_layer() -> None:
    units = {unit_of(module_name(path)) for path in PACKAGE.rglob("*.py")} - {"harness"}
    assert units - set(LAYER_OF) == set(), "place new packages in LAYERS (and the docs)"


def test_no_import_goes_up_a_layer() -> None:
    upward = [
        where
        for source, target, where in edges()
        if LAYER_OF.get(target, -1) > LAYER_OF.get(source, len(LAYERS))
    ]
    assert upward == []


def test_no_import_cycle_between_packages() -> None:
    graph = nx.DiGraph((source, target) for source, target, _ in edges())
    assert list(nx.simple_cycles(graph)) == []


def test_the_check_finds_an_upward_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from harness.cli import app\n")
    assert harness_imports(probe) == [(2, "harness.cli")]
    assert LAYER_OF[unit_of("harness.cli")] > LAYER_OF[unit_of("harness.specs.task")]

"""Imports follow the layers of docs/architecture.md: a module never imports a higher layer,
and no two packages of the harness import each other (directly or round a longer cycle)."""

from __future__ import annotations

import ast
import inspect
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
    {"sim", "grading", "production", "sdk"},
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


# Modules that may name a check kind outside its own file, and which kinds. Everything else
# asks the kind's class what it needs (`uses_judge`, `runs_code`, `references()`, `passes_when`).
KIND_NAMERS: dict[str, set[str]] = {
    # the one list of built-in kinds, the registry's
    "harness/specs/checks.py": {"*"},
    # writers of tasks made from production: they write these kinds, by their fields (a judge's
    # `criterion`, a text check's `contains`), as a person writes a task file
    "harness/production/derive.py": {"llm_judge", "text"},
    "harness/production/criteria.py": {"llm_judge"},
}


def check_kinds() -> dict[str, tuple[str, set[str]]]:
    """Every registered check kind: its class's name and the files that define it (the class's
    and the handler's modules)."""
    from harness.grading.checks import HANDLERS
    from harness.specs.checks import CHECK_KINDS

    kinds = {}
    for kind, model in CHECK_KINDS.items():
        files = {inspect.getsourcefile(model), inspect.getsourcefile(HANDLERS.get(kind) or model)}
        kinds[kind] = (model.__name__, {str(Path(f).resolve()) for f in files if f})
    return kinds


def _names_kind(node: ast.expr) -> bool:
    """Whether an expression reads a check's kind: `kind`, `x.kind`, `x["kind"]`, `x.get("kind")`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr == "get" and _constants(node.args[:1]) == ["kind"]
    if isinstance(node, ast.Subscript):
        return _constants([node.slice]) == ["kind"]
    return (isinstance(node, ast.Name) and node.id == "kind") or (
        isinstance(node, ast.Attribute) and node.attr == "kind"
    )


def _constants(nodes: list[ast.expr]) -> list[str]:
    """The string constants of expressions, inside tuples, lists and sets too."""
    found: list[str] = []
    for node in nodes:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append(node.value)
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            found += _constants(node.elts)
    return found


def kind_mentions(path: Path, kinds: dict[str, tuple[str, set[str]]]) -> list[tuple[int, str]]:
    """(line, kind) wherever a file names a check kind: its name compared with a kind
    (`check.kind == "llm_judge"`, `kind in ("python", ...)`), or its class by name."""
    classes = {name: kind for kind, (name, _) in kinds.items()}
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(map(_names_kind, sides)):
                found += [(node.lineno, v) for v in _constants(sides) if v in kinds]
        elif isinstance(node, ast.Name | ast.Attribute):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if name in classes:
                found.append((node.lineno, classes[name]))
        elif isinstance(node, ast.ImportFrom):
            found += [(node.lineno, classes[a.name]) for a in node.names if a.name in classes]
    return sorted(found)


def test_no_module_outside_a_check_kinds_own_file_names_it() -> None:
    kinds = check_kinds()
    named = []
    for path in sorted(PACKAGE.rglob("*.py")):
        allowed = KIND_NAMERS.get(str(path.relative_to(ROOT)), set())
        for line, kind in kind_mentions(path, kinds):
            if str(path.resolve()) not in kinds[kind][1] and not allowed & {"*", kind}:
                named.append(f"{path.relative_to(ROOT)}:{line} names check kind '{kind}'")
    assert named == [], "ask the kind's class (uses_judge, runs_code, ...) instead"


def test_the_check_finds_a_named_kind(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from harness.grading.checks.python import PythonCheck\n"
        "judged = [c for c in checks if c.kind == 'llm_judge']\n"
        "coded = isinstance(check, PythonCheck) or data['kind'] in ('text', 'task')\n"
        "runner = variant.runner == 'python'\n"
    )
    assert kind_mentions(probe, check_kinds()) == [
        (1, "python"),
        (2, "llm_judge"),
        (3, "python"),
        (3, "text"),
    ]

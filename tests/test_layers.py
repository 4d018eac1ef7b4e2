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
    {"pipeline", "scaffold", "view"},
    {"api"},
    {"climb"},
    {"cli", "__main__"},
]
# The service code a command reaches only through `harness.api`: one way in, so a command and
# a library call never disagree (the CLI parses, calls one API function, prints).
SERVICES = {"pipeline", "engine"}
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


def cli_service_imports() -> list[str]:
    """Where a CLI module imports service code past the API."""
    return [where for source, target, where in edges() if source == "cli" and target in SERVICES]


def test_no_cli_module_imports_the_pipeline_or_engine() -> None:
    assert cli_service_imports() == []


def test_the_check_finds_a_command_importing_service_code(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from harness.pipeline.runner import run_pipeline\n")
    [(line, name)] = harness_imports(probe)
    assert line == 2 and unit_of(name) in SERVICES


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


# ---------------------------------------------------------------- module size and module cycles

MAX_LINES = 450  # a module longer than this holds more than one job: split it


def long_modules(package: Path) -> list[str]:
    """The modules of a package over `MAX_LINES` lines, with their length."""
    found = []
    for path in sorted(package.rglob("*.py")):
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES:
            found.append(f"{path.relative_to(package.parent)}: {lines} lines")
    return found


def test_no_module_is_over_450_lines() -> None:
    assert long_modules(PACKAGE) == [], f"split modules over {MAX_LINES} lines by their jobs"


def test_the_check_finds_a_long_module(tmp_path: Path) -> None:
    package = tmp_path / "harness"
    package.mkdir()
    (package / "short.py").write_text("x = 1\n" * MAX_LINES)
    (package / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert long_modules(package) == [f"harness/long.py: {MAX_LINES + 1} lines"]


def imported_modules(path: Path) -> set[str]:
    """Every name a file imports, at any depth (function-local imports count), except under
    `if TYPE_CHECKING:`: `import a.b` gives `a.b`; `from a import b` gives `a` and `a.b` (`b`
    may be a module)."""
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for statement in node.body
        for inner in ast.walk(statement)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def module_graph(package: Path) -> nx.DiGraph:
    """Which module of a package imports which (a package stands for its `__init__.py`, so a
    submodule importing its own package is an edge to it)."""
    modules = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        graph.add_edges_from(
            (name, m) for m in imported_modules(path) if m in modules and m != name
        )
    return graph


def module_cycles(package: Path) -> list[list[str]]:
    """The groups of modules that import each other, directly or round a longer cycle."""
    groups = nx.strongly_connected_components(module_graph(package))
    return sorted(sorted(group) for group in groups if len(group) > 1)


def test_no_import_cycle_between_modules() -> None:
    assert module_cycles(PACKAGE) == [], "a factory belongs in the package, not the base module"


def test_the_check_finds_an_import_cycle_between_modules(tmp_path: Path) -> None:
    package = tmp_path / "harness" / "p"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("from harness.p.base import Base\n")
    (package / "base.py").write_text(
        "class Base:\n    def make(self):\n        from harness.p import sub\n"
    )
    (package / "sub.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness.p.base import Base\n"
    )
    (package / "loop.py").write_text("import harness.p.other\n")
    (package / "other.py").write_text("from harness.p.loop import x\n")
    assert module_cycles(package.parent) == [
        ["harness.p", "harness.p.base"],  # a module importing its own package counts
        ["harness.p.loop", "harness.p.other"],
    ]  # `sub` imports `base` only for type checking: no cycle

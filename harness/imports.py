"""Objects named by a reference in user YAML: `package.module:Name` (importable) or
`path/to/file.py:Name` (a file, relative to the YAML file that names it). Agents' `entry:` and
tasks' `domain:` both resolve this way."""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any


class UnresolvedReference(LookupError):
    """A reference that names no module, file or attribute; the message says which part."""


def is_reference(text: str) -> bool:
    """Whether `text` is `module:Name` / `file.py:Name` rather than a registered name."""
    return ":" in text


def split_reference(text: str) -> tuple[str, str]:
    module, _, name = text.rpartition(":")
    if not module or not name:
        raise UnresolvedReference(f"'{text}' is not 'package.module:Name' or 'path/file.py:Name'")
    return module, name


def module_file(module: str, base: Path | None = None) -> Path:
    """The source file of the module part of a reference."""
    if module.endswith(".py"):
        path = base / module if base is not None else Path(module)  # an absolute module wins
        if not path.is_file():
            raise UnresolvedReference(f"no file '{path}'")
        return path.resolve()
    _importable_from_cwd()
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or spec.origin is None:
        raise UnresolvedReference(f"cannot find module '{module}'")
    return Path(spec.origin)


def import_module(module: str, base: Path | None = None) -> ModuleType:
    """Import the module part of a reference. A file is imported once per path (under a name
    derived from its path), so that two references to one file share its classes."""
    if not module.endswith(".py"):
        _importable_from_cwd()
        try:
            return importlib.import_module(module)
        except ImportError as exc:
            raise UnresolvedReference(f"cannot import '{module}': {exc}") from None
    path = module_file(module, base)
    name = f"harness_user_{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[name] = loaded
    try:
        spec.loader.exec_module(loaded)
    except BaseException:
        del sys.modules[name]
        raise
    return loaded


def load_reference(text: str, base: Path | None = None) -> Any:
    """The object a reference names."""
    module, name = split_reference(text)
    loaded = import_module(module, base)
    try:
        return getattr(loaded, name)
    except AttributeError:
        raise UnresolvedReference(f"'{module}' defines no '{name}'") from None


def defined_names(source: str, filename: str = "<code>") -> set[str] | None:
    """The names Python source defines at module level (functions, classes, assignments,
    imports, also under a top-level `if` or `try`), read without running it; None when the
    source cannot tell (a `*` import, a module `__getattr__`). Raises SyntaxError when the
    source does not compile."""
    tree = ast.parse(source, filename)
    compile(tree, filename, "exec")
    names: set[str] = set()
    for node in _module_level(tree.body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == "__getattr__":
                return None
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            if node.name == "*":
                return None
            names.add(node.asname or node.name.split(".")[0])
    return names


def _module_level(nodes: Iterable[ast.AST]) -> Iterator[ast.AST]:
    """The nodes of a module outside function and class bodies."""
    for node in nodes:
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield from _module_level(ast.iter_child_nodes(node))


def _importable_from_cwd() -> None:
    """Modules of the project folder import like installed ones (as `python -m` would)."""
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))

"""Objects named by a reference in user YAML: `package.module:Name` (importable) or
`path/to/file.py:Name` (a file, relative to the YAML file that names it). Agents' `entry:`,
tasks' `domain:` and the project file's `plugins:` all import the user's code this way.

The user's module is input like a YAML file: one that does not import (a syntax error, a
missing import, an exception in its body, a class that breaks harness's rules of definition) is
a `UserCodeError`, located at the file and line of the user's code that failed, never a crash
of the harness."""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import sys
import sysconfig
import traceback
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any


class UnresolvedReference(LookupError):
    """A reference that names no module, file or attribute; the message says which part."""


class UserCodeError(UnresolvedReference):
    """The user's module failed to import: `file:line:col: what went wrong`, located at the
    innermost frame of the user's code (not harness's, not a library's). Bad input, exit 2:
    the fix is in that file. `source`, `line` and `col` locate it (`line` None when no frame
    of the user's code is known); `detail` is the message without the location."""

    def __init__(self, source: str, line: int | None, col: int | None, detail: str):
        self.source, self.line, self.col, self.detail = source, line, col, detail
        where = source if line is None else f"{source}:{line}:{col or 1}"
        super().__init__(f"{where}: {detail}")


class BadDefinition(TypeError):
    """User code that defines something harness cannot use (a domain class without a name, a
    tool with `*args`): raised while the user's module runs, so its `UserCodeError` is located
    at the definition; the message names what is wrong and the fix, without a type name."""


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
        except ModuleNotFoundError as exc:
            if exc.name is not None and (module + ".").startswith(exc.name + "."):
                raise UnresolvedReference(f"cannot import '{module}': {exc}") from None  # itself
            raise user_code_error(exc, module) from None
        except Exception as exc:  # pylint: disable=broad-exception-caught  # the user's code
            raise user_code_error(exc, module) from None
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
    except Exception as exc:  # pylint: disable=broad-exception-caught  # the user's code
        del sys.modules[name]
        raise user_code_error(exc, shown(path)) from None
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


_HARNESS = Path(__file__).resolve().parent
_LIBRARIES = tuple(
    Path(p).resolve()
    for p in {sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    if p
)


def shown(path: Path | str) -> str:
    """A file of the user's code as an error or a stored reason shows it, with no absolute path
    of their machine (a reason is stored, reported and shared): relative to the working folder
    when inside it, else from `~` under the home folder, else its folder and name
    (`checkers/agent.py`). (`harness.specs.located.display` shows spec files; this bottom-layer
    module, which `harness.specs` imports, cannot import it.)"""
    try:
        resolved = Path(path).resolve()
    except (OSError, RuntimeError):  # a symlink loop
        resolved = Path(path)
    for folder, prefix in ((Path.cwd(), ""), (Path.home(), "~/")):
        try:
            return prefix + str(resolved.relative_to(folder.resolve()))
        except ValueError:
            continue
    return str(Path(*resolved.parts[-2:]))


def _kind_of(filename: str) -> str:
    """Whose code a traceback's file is: `harness`, `library` (the standard library's, an
    installed package's) or `user` (the project's own files); frozen and `<string>` code is
    nothing to open, so harness's."""
    if filename.startswith("<"):
        return "harness"
    try:
        path = Path(filename).resolve()
    except (OSError, RuntimeError):
        return "harness"
    if path.is_relative_to(_HARNESS):
        return "harness"
    return "library" if any(path.is_relative_to(lib) for lib in _LIBRARIES) else "user"


def user_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    """The frames of the user's code in an exception's traceback, outermost first: where a
    crash of their domain, tool or agent is shown. Code installed as a package (its files among
    the libraries) has its frames there: then those are the user's."""
    frames = traceback.extract_tb(exc.__traceback__)
    kinds = [_kind_of(frame.filename) for frame in frames]
    wanted = "user" if "user" in kinds else "library"
    return [frame for frame, kind in zip(frames, kinds, strict=True) if kind == wanted]


def frame_text(frame: traceback.FrameSummary) -> str:
    """A frame as a reason names it: `agent.py:21 in respond`."""
    return f"{shown(frame.filename)}:{frame.lineno} in {frame.name}"


def user_code_error(exc: Exception, module: str) -> UserCodeError:
    """The located error of a user's module that raised `exc` while importing; `module` (its
    file as shown, or its name) is the location when no frame of the user's code is known."""
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:  # the parser's position
        detail = f"{type(exc).__name__}: {exc.msg}"
        return UserCodeError(shown(exc.filename), exc.lineno, exc.offset, detail)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _kind_of(f.filename) == "user"]
    if not frames:
        return UserCodeError(module, None, None, _described(exc))
    frame = frames[-1]
    colno: int | None = getattr(frame, "colno", None)
    col = colno + 1 if colno is not None else 1
    found = _state_instance(frame.filename, frame.lineno, exc) if frame.lineno else None
    return UserCodeError(shown(frame.filename), frame.lineno, col, found or _described(exc))


def _described(exc: BaseException) -> str:
    """An exception on one line: `Type: message` (our `BadDefinition`: the message alone, it
    says what to fix); a pydantic `ValidationError` with each error's field and message."""
    from pydantic import ValidationError

    if isinstance(exc, BadDefinition):
        return _one_line(str(exc))
    if isinstance(exc, ValidationError):
        errors = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors()
        )
        count = exc.error_count()
        message = f"{count} validation error{'s' * (count != 1)} for {exc.title}: {errors}"
    else:
        message = _one_line(str(exc))
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _one_line(text: str) -> str:
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def _state_instance(filename: str, line: int, exc: Exception) -> str | None:
    """What a domain's `State = FerryState()` that raised means: the class attribute wants the
    model class, and the call built (and validated) an instance. None for any other line."""
    try:
        tree = ast.parse(Path(filename).read_text(encoding="utf-8"), filename)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for statement in node.body:
            target, value = _assigned(statement)
            if target == "State" and isinstance(value, ast.Call) and statement.lineno == line:
                model = ast.unparse(value.func)
                return (
                    f"{node.name}.State: expected a pydantic model class (`State = {model}`), "
                    f"not an instance (`{ast.unparse(value)}`, which raised {_described(exc)})"
                )
    return None


def _assigned(statement: ast.stmt) -> tuple[str | None, ast.expr | None]:
    """The name and value of a one-name assignment (`x = v`, `x: T = v`), else (None, None)."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = statement.targets[0]
        return (target.id if isinstance(target, ast.Name) else None), statement.value
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
        return statement.target.id, statement.value
    return None, None


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

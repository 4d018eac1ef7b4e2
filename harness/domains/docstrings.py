"""A tool's docstring split into its description and its parameters' descriptions.

Three styles document parameters: Google (`Args:` then an indented `name: text` per parameter,
a type in parentheses allowed, continuation lines indented further), NumPy (`Parameters` over a
line of dashes, then `name : type` with the text indented below) and Sphinx (`:param name:
text`). A docstring that documents parameters loses its parameter, return and raise sections
from the tool's description (the summary and the body stay); any other docstring is the
description unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Google-style section headers (lower case) whose entries are parameters, and the other sections
# dropped from the description beside them.
GOOGLE_PARAMETERS = frozenset(
    {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"}
)
GOOGLE_DROPPED = GOOGLE_PARAMETERS | {"returns", "return", "yields", "yield", "raises"}
NUMPY_PARAMETERS = frozenset({"parameters", "other parameters"})
NUMPY_DROPPED = NUMPY_PARAMETERS | {"returns", "yields", "raises"}

_GOOGLE_HEADER = re.compile(r"([A-Za-z][A-Za-z ]*?)\s*:\s*")
_GOOGLE_ENTRY = re.compile(r"\*{0,2}([A-Za-z_]\w*)\s*(?:\([^)]*\))?\s*:(.*)")
_NUMPY_ENTRY = re.compile(r"(\*{0,2}[A-Za-z_]\w*(?:\s*,\s*\*{0,2}[A-Za-z_]\w*)*)\s*(?::.*)?")
SPHINX_PARAMETERS = frozenset({"param", "parameter", "arg", "argument", "key", "keyword"})
_SPHINX_FIELD = re.compile(
    r":(param|parameter|arg|argument|key|keyword|type|returns?|rtype|raises?|except)\b([^:]*):(.*)"
)
_DASHES = re.compile(r"-{3,}")


@dataclass(frozen=True)
class ToolDoc:
    """A docstring as a tool shows it: its description, and text per documented parameter."""

    description: str
    parameters: dict[str, str] = field(default_factory=dict)


def parse_tool_doc(doc: str) -> ToolDoc:
    """The description and parameter texts of a cleaned docstring (`inspect.getdoc`)."""
    lines = doc.splitlines()
    kept: list[str] = []
    parameters: dict[str, str] = {}
    documents_parameters = False
    i = 0
    while i < len(lines):
        line = lines[i]
        header = _GOOGLE_HEADER.fullmatch(line)
        if header and header[1].lower() in GOOGLE_DROPPED:
            end = _indented_block_end(lines, i + 1)
            if header[1].lower() in GOOGLE_PARAMETERS:
                documents_parameters = True
                parameters.update(_google_entries(lines[i + 1 : end]))
            i = end
            continue
        if _is_numpy_header(lines, i) and line.strip().lower() in NUMPY_DROPPED:
            end = i + 2
            while end < len(lines) and not _is_numpy_header(lines, end):
                end += 1
            if line.strip().lower() in NUMPY_PARAMETERS:
                documents_parameters = True
                parameters.update(_numpy_entries(lines[i + 2 : end]))
            i = end
            continue
        sphinx = _SPHINX_FIELD.fullmatch(line.strip()) if not line[:1].isspace() else None
        if sphinx:
            end = _indented_block_end(lines, i + 1, blank_ends=True)
            text = _joined([sphinx[3], *lines[i + 1 : end]])
            name = sphinx[2].split()[-1:]  # `:param str when:` names `when`
            if sphinx[1] in SPHINX_PARAMETERS and name:
                documents_parameters = True
                parameters[name[0].lstrip("*")] = text
            i = end
            continue
        kept.append(line)
        i += 1
    if not documents_parameters:
        return ToolDoc(doc)
    return ToolDoc(_tidy(kept), {name: text for name, text in parameters.items() if text})


def _indented_block_end(lines: list[str], start: int, blank_ends: bool = False) -> int:
    """The index after the block of indented (or blank) lines starting at `start`."""
    end = start
    while end < len(lines):
        line = lines[end]
        if line.strip() == "":
            if blank_ends:
                break
        elif not line[:1].isspace():
            break
        end += 1
    return end


def _is_numpy_header(lines: list[str], i: int) -> bool:
    return (
        i + 1 < len(lines)
        and bool(lines[i].strip())
        and not lines[i][:1].isspace()
        and bool(_DASHES.fullmatch(lines[i + 1].strip()))
    )


def _google_entries(block: list[str]) -> dict[str, str]:
    """`name (type): text` entries at the block's least indent, more indented lines continuing."""
    indents = [len(line) - len(line.lstrip()) for line in block if line.strip()]
    if not indents:
        return {}
    entry_indent = min(indents)
    entries: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in block:
        indent = len(line) - len(line.lstrip())
        entry = _GOOGLE_ENTRY.fullmatch(line.strip()) if indent == entry_indent else None
        if entry:
            current = entries.setdefault(entry[1], [])
            current.append(entry[2])
        elif current is not None:
            current.append(line)
    return {name: _joined(text) for name, text in entries.items()}


def _numpy_entries(block: list[str]) -> dict[str, str]:
    """`name : type` lines, unindented, each followed by its indented text."""
    entries: dict[str, list[str]] = {}
    current: list[list[str]] = []
    for line in block:
        if line.strip() and not line[:1].isspace():
            entry = _NUMPY_ENTRY.fullmatch(line.strip())
            names = [n.strip().lstrip("*") for n in entry[1].split(",")] if entry else []
            current = [entries.setdefault(name, []) for name in names]
        else:
            for text in current:
                text.append(line)
    return {name: _joined(text) for name, text in entries.items()}


def _joined(lines: list[str]) -> str:
    """Lines of one description as one line of text."""
    return " ".join(line.strip() for line in lines if line.strip())


def _tidy(lines: list[str]) -> str:
    """The kept lines, with runs of blank lines (where sections were) made one."""
    tidied: list[str] = []
    for line in lines:
        if line.strip() or (tidied and tidied[-1].strip()):
            tidied.append(line.rstrip() if not line.strip() else line)
    return "\n".join(tidied).strip()

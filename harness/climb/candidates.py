"""Candidates as GEPA sees them (component name -> text) and as harness runs them (a variant
file that `extends` production and holds only what changed)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml

from harness.specs.agent import AgentVariant
from harness.specs.climb import Components

SYSTEM_PROMPT = "system_prompt"
SKILL = "skill:"
TOOL = "tool:"
PARAMETER = "parameter:"


class InvalidCandidate(ValueError):
    """A proposal the variant cannot take (a parameter that is no number or out of range)."""


def seed_candidate(
    production: AgentVariant, components: Components, tool_docs: dict[str, str]
) -> dict[str, str]:
    """Production's text for every component that may change (a new skill starts empty; a
    tool's description is production's, else the domain's docstring in `tool_docs`)."""
    seed: dict[str, str] = {}
    if components.system_prompt:
        seed[SYSTEM_PROMPT] = production.system_prompt
    for skill in components.skills:
        seed[SKILL + skill] = production.skills.get(skill, "")
    for tool in components.tool_descriptions:
        seed[TOOL + tool] = production.tool_descriptions.get(tool, tool_docs[tool])
    for name in components.parameters:
        seed[PARAMETER + name] = _number_text(getattr(production.parameters, name))
    return seed


def changes(
    candidate: dict[str, str], seed: dict[str, str], components: Components
) -> dict[str, Any]:
    """The variant fields a candidate changes against production, checked."""
    changed: dict[str, Any] = {}
    for component, text in sorted(candidate.items()):
        if text == seed.get(component):
            continue
        if component == SYSTEM_PROMPT:
            changed[SYSTEM_PROMPT] = text
        elif component.startswith(SKILL):
            changed.setdefault("skills", {})[component.removeprefix(SKILL)] = text.strip() or None
        elif component.startswith(TOOL):
            changed.setdefault("tool_descriptions", {})[component.removeprefix(TOOL)] = text
        elif component.startswith(PARAMETER):
            name = component.removeprefix(PARAMETER)
            changed.setdefault("parameters", {})[name] = _parameter(
                name, text, components.parameters[name]
            )
    return changed


def candidate_id(changed: dict[str, Any]) -> str:
    """A short id from the changes (the same changes, the same id); production is itself."""
    if not changed:
        return "production"
    text = json.dumps(changed, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def variant_yaml(
    name: str, production_file: Path, changed: dict[str, Any], description: str, header: str = ""
) -> str:
    """A variant file that extends production with only the changed fields."""
    data = {"kind": "agent", "name": name, "extends": str(production_file)}
    data |= {"description": description, **changed}
    body = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    return header + body


def _parameter(name: str, text: str, bounds: tuple[float, float]) -> float | int:
    try:
        value = float(text.strip().strip("`"))
    except ValueError:
        raise InvalidCandidate(f"parameter {name}: {text.strip()[:40]!r} is not a number") from None
    low, high = bounds
    if not low <= value <= high:
        raise InvalidCandidate(f"parameter {name}: {value:g} is outside [{low:g}, {high:g}]")
    return int(value) if name != "temperature" else value


def _number_text(value: float | int) -> str:
    return f"{value:g}"

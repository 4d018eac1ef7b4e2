"""Candidates as GEPA sees them (component name -> text) and as harness runs them: a variant
that `extends` production and holds only what changed, built in memory (`CandidateVariants`)
exactly as a variant file of those changes would load (`variant_yaml`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, cast

import yaml

from harness.sim.agent import check_agent
from harness.sim.suite import TaskCase, check_variant
from harness.specs.agent import AgentVariant
from harness.specs.climb import Components, Tunable
from harness.specs.load import AGENT_FILES, Loaded
from harness.specs.overrides import Override, apply_overrides, deep_merge
from harness.specs.references import read_extends
from harness.specs.validation import validate

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
            # a seed's component name (GEPA keeps them): one of `components.parameters`
            name = cast(Tunable, component.removeprefix(PARAMETER))
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


CANDIDATE_DESCRIPTION = "A climb candidate."


class CandidateVariants:
    """Each candidate as a loaded variant, built once: production's file (its `extends` chain,
    read once) merged with the candidate's changes and the climb's overrides, validated and
    checked (against the climb's tasks too) as if `variant_yaml` had written it to a file that
    extends production (the same variant, so the same content hash), with no file written."""

    def __init__(
        self,
        production_file: Path,
        prefix: str,
        overrides: list[Override],
        cases: list[TaskCase],
    ):
        self.production_file, self.prefix, self.overrides = production_file, prefix, overrides
        self.cases = cases
        self.data, self.positions = read_extends(production_file, "agent", AGENT_FILES)
        self.built: dict[str, Loaded[AgentVariant]] = {}

    def variant(self, ident: str, changed: dict[str, Any]) -> Loaded[AgentVariant]:
        """The variant of a candidate (`ident`, as `candidate_id` names its changes)."""
        if ident not in self.built:
            name = f"{self.prefix}-{ident}"
            own = {"name": name, "description": CANDIDATE_DESCRIPTION, **changed}
            data = deep_merge(self.data, own)
            data["extends"] = str(self.production_file)
            positions = dict(self.positions)
            data = apply_overrides(data, self.overrides, positions)
            spec = validate(AgentVariant, data, positions, self.production_file)
            loaded = check_agent(Loaded(spec, self.production_file, positions))
            check_variant(loaded, self.cases)
            self.built[ident] = loaded
        return self.built[ident]


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

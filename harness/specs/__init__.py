"""Pydantic models of every YAML file kind, and the loader that reads them with located errors."""

from harness.specs.agent import AgentVariant, ModelRef, Parameters
from harness.specs.checks import Check, StateCheck, TextCheck, ToolCalledCheck
from harness.specs.dag import Dag
from harness.specs.gate import Gate
from harness.specs.load import Loaded, Location, Problem, SpecError
from harness.specs.persona import Persona
from harness.specs.script import Rule, Script
from harness.specs.task import Task

__all__ = [
    "AgentVariant",
    "Check",
    "Dag",
    "Gate",
    "Loaded",
    "Location",
    "ModelRef",
    "Parameters",
    "Persona",
    "Problem",
    "Rule",
    "Script",
    "SpecError",
    "StateCheck",
    "Task",
    "TextCheck",
    "ToolCalledCheck",
]

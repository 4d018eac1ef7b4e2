"""Pydantic models of every YAML file kind, and the loader that reads them with located errors."""

from harness.specs.agent import AgentVariant, ModelRef, Parameters
from harness.specs.checks import CheckBase, References
from harness.specs.dag import Dag
from harness.specs.gate import Gate
from harness.specs.load import Loaded
from harness.specs.located import Location, Problem, SpecError
from harness.specs.persona import Persona
from harness.specs.script import Rule, Script
from harness.specs.task import Task

# Check kinds' models live in their own modules (harness.grading.checks); `Check`, their union,
# is built from the check-kind registry on first use.


def __getattr__(name: str) -> object:
    from harness.specs.checks import check_union

    if name == "Check":
        return check_union()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AgentVariant",
    "CheckBase",
    "Dag",
    "Gate",
    "Loaded",
    "Location",
    "ModelRef",
    "Parameters",
    "Persona",
    "Problem",
    "References",
    "Rule",
    "Script",
    "SpecError",
    "Task",
]

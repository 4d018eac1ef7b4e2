"""Check kinds: the shape every kind shares, and the registry that task files are validated with.

A check kind is one module: its spec model (a `CheckBase` with a `kind` literal), its grading
handler, and `references()`, what it names outside itself. The built-in kinds live in
`harness.grading.checks`, plug-ins in packages with a `harness.checks` entry point; both are
imported by name on first use, so this core module never imports the layers above it. `Check`,
the tagged union of every registered kind, is therefore built on first use too.
"""

from __future__ import annotations

import functools
import operator
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeVar

from pydantic import Field

from harness.registry import Registry
from harness.specs.base import Spec
from harness.specs.located import PathKey

# The one list of built-in kinds, in the order error messages and the JSON Schema show them.
BUILTIN_KINDS = (
    "state",
    "end_state",
    "tool_called",
    "tool_order",
    "text",
    "json_schema",
    "python",
    "llm_judge",
    "no_error",
    "no_false_success",
)


@dataclass(frozen=True)
class References:
    """What a check names outside itself, each keyed by the check's field that names it (e.g.
    `("tools", 1)`), so that a cross-check can point at the very value: tools of the task's
    domain, parameters of those tools as (tool, parameter), files (resolved against the task
    file when loaded), JSONPaths into the state, values it expects the state to hold as
    (JSONPath, value), and values it expects a tool's parameter to be given as (tool,
    parameter, value): a mapping is partial, naming only the keys it expects."""

    tools: dict[PathKey, str] = field(default_factory=dict)
    files: dict[PathKey, str] = field(default_factory=dict)
    state_paths: dict[PathKey, str] = field(default_factory=dict)
    tool_parameters: dict[PathKey, tuple[str, str]] = field(default_factory=dict)
    state_values: dict[PathKey, tuple[str, Any]] = field(default_factory=dict)
    tool_arguments: dict[PathKey, tuple[str, str, Any]] = field(default_factory=dict)


class CheckBase(Spec):
    """Fields every check kind shares: how its result counts towards the task's verdict.

    A kind also declares, on its class, what it needs, so that nothing outside its module names
    it: `uses_judge` (its handler asks the run's judge model, `CheckContext.judge_model`, unless
    the check names its own in a `model` field), `runs_code` (it runs code the task ships, which
    needs OS isolation or the user's permission), and `passes_when`, the one line that says when
    it passes (docs/guide/graders.md's table); the references it makes are `references()`."""

    uses_judge: ClassVar[bool] = False
    runs_code: ClassVar[bool] = False
    passes_when: ClassVar[str] = ""

    name: str | None = Field(default=None, description="Short label shown in reports.")
    hard: bool = Field(
        default=True,
        description="A hard check must pass for the task to pass; a soft one only adds to "
        "the score.",
    )
    weight: float = Field(default=1.0, ge=0, description="Weight of a soft check in the score.")
    diagnostic: bool = Field(
        default=False, description="Reported for information only; never affects the verdict."
    )

    @property
    def gates(self) -> bool:
        """Whether this check can decide a verdict."""
        return self.hard and not self.diagnostic

    def label(self) -> str:
        """A readable name for reports."""
        return self.name or self.kind  # type: ignore[attr-defined]

    def references(self) -> References:
        """The tools, files and state paths this check uses; a kind naming any overrides this.
        They also tell what the check observes: a check naming tools reads the agent's tool
        calls, one naming state paths the final state (which a runner may be unable to show)."""
        return References()

    def reference_problems(self) -> dict[PathKey, str]:
        """What is wrong with what this check names that its fields alone cannot show (e.g. the
        code in a file it names), by the field at fault. Asked when its task is loaded, once its
        files are resolved; a kind that can tell overrides this."""
        return {}


CHECK_KINDS: Registry[type[CheckBase]] = Registry(
    "check kind",
    tuple(f"harness.grading.checks.{kind}" for kind in BUILTIN_KINDS),
    group="harness.checks",
)
C = TypeVar("C", bound=type[CheckBase])


def kind_name(model: type[CheckBase]) -> str:
    """The name a spec model's `kind: Literal[...]` field gives its kind."""
    info = model.model_fields.get("kind")
    annotation = info.annotation if info is not None else None
    names = typing.get_args(annotation)
    if typing.get_origin(annotation) is not typing.Literal or len(names) != 1:
        raise TypeError(f"{model.__name__} needs a field `kind: Literal['<name>']`")
    return str(names[0])


def register_kind(model: C) -> C:
    """Decorator: make a spec model a check kind that tasks can list, under its `kind` name."""
    CHECK_KINDS.register(kind_name(model))(model)
    return model


@functools.cache
def check_union() -> Any:
    """The tagged union of every registered kind: built-in kinds in their order, then plug-ins
    (which the registry loads from their entry points first). Built once, on first use."""
    models = [CHECK_KINDS.get(kind) for kind in BUILTIN_KINDS]
    models += [model for kind, model in CHECK_KINDS.items() if kind not in BUILTIN_KINDS]
    return Annotated[functools.reduce(operator.or_, models), Field(discriminator="kind")]


if TYPE_CHECKING:
    Check = CheckBase
else:

    def __getattr__(name: str) -> Any:
        """`Check` is built on first use: the kinds' modules import this one."""
        if name == "Check":
            return check_union()
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

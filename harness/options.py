"""The options of every entry point, one pydantic model each, the same rules for the library
and the command line: `harness.evaluate(..., trials=...)` and `harness run-eval --trials` are
checked by `EvalOptions`, `load_suite` and the task selection options by `SelectionOptions`,
and so on. Booleans are booleans (`unsafe_checkers="false"` is refused, never truthy), counts
are integers in a documented range, names are one of the known ones.

A value that breaks a rule is `BadOptions`: a `SpecError` (the command line prints its one line
and exits 2) and a `ValueError` (what a Python caller expects of a bad argument), naming the
entry point, the option and what was expected, before anything is played or written.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypeAlias, TypeVar, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationError,
)

from harness import defaults
from harness.specs.agent import ModelRef, missing_scripts
from harness.specs.located import Location, Problem, SpecError, format_path


def _integral(value: Any) -> Any:
    """A NumPy (or any `numbers.Integral`) integer as an `int`; a bool stays a bool (refused
    where a count is expected: `trials=True` is a mistake, not one trial)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return value


Integral = BeforeValidator(_integral)

EXECUTORS = ("local", "ray")
"""Where episodes may be played (`harness.engine.executors.EXECUTORS`)."""

Trials = Annotated[
    int,
    Integral,
    Field(
        strict=True,
        ge=1,
        le=defaults.MAX_TRIALS,
        description=f"Episodes per task (1 to {defaults.MAX_TRIALS:,}).",
    ),
]
Concurrency = Annotated[
    int,
    Integral,
    Field(
        strict=True,
        ge=1,
        le=defaults.MAX_CONCURRENCY,
        description=f"Episodes played (or graded) at once (1 to {defaults.MAX_CONCURRENCY:,}).",
    ),
]
Seed = Annotated[int, Integral, Field(strict=True, ge=0, description="A seed: 0 or more.")]
Count = Annotated[int, Integral, Field(strict=True, ge=1, description="A count: 1 or more.")]
Executor = Literal["local", "ray"]


class Options(BaseModel):
    """The options of one entry point: no unknown option, every value checked."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, frozen=True)


class EvalOptions(Options):
    """`harness.evaluate` / `evaluate_async`, and the options `harness run-eval` shares."""

    trials: Trials = 1
    concurrency: Concurrency = defaults.CONCURRENCY
    store: Any = Field(
        default=defaults.RESULTS_STORE,
        description="Results store: a SQLite file (path) or a PostgreSQL URL.",
    )
    judge_model: Any = Field(
        default=None, description="Judge of llm_judge checks that name none (ModelRef, id, dict)."
    )
    runtime: Any = Field(default=None, description="A model runtime (`open_runtime`).")
    traces: Path | None = Field(default=None, description="Local trace store to record into.")
    weave_project: StrictStr | None = Field(
        default=None, description="W&B project (entity/project) to trace to."
    )
    executor: Executor | None = Field(
        default=None, description="Where episodes are played: local or ray (default local)."
    )
    workers: Count | None = Field(default=None, description="Ray workers (default: one per CPU).")
    unsafe_checkers: StrictBool = Field(
        default=False,
        description="Let python checks run without OS isolation where there is none (a bool).",
    )
    progress: StrictBool | None = Field(
        default=False, description="A live board (True), none (False), on a terminal (None)."
    )


class RuntimeOptions(Options):
    """`harness.open_runtime`, and `--timeout`/`--retries`."""

    cache: Path | None = Field(default=defaults.RESPONSE_CACHE, description="Response cache.")
    prices: Path | None = Field(default=None, description="Prices file (USD per 1M tokens).")
    timeout_s: float = Field(
        default=defaults.MODEL_TIMEOUT_S,
        ge=0.01,
        le=86_400,
        allow_inf_nan=False,
        description="Seconds per model call (0.01 to 86,400).",
    )
    retries: Annotated[int, Integral] = Field(
        default=defaults.MODEL_RETRIES,
        strict=True,
        ge=0,
        le=100,
        description="Retries of a failed model call (0 to 100).",
    )


class SelectionOptions(Options):
    """`harness.load_suite`'s selection, and `--ids/--tags/--level/--sample/--seed/--limit`."""

    ids: list[StrictStr] = Field(default_factory=list, description="Only these task ids.")
    tags: list[StrictStr] = Field(default_factory=list, description="Only tasks with a tag.")
    levels: list[int] = Field(default_factory=list, description="Only tasks of these levels.")
    sample: Count | None = Field(default=None, description="A random sample of N tasks.")
    seed: Seed = 0
    limit: Count | None = Field(default=None, description="At most N tasks, in file order.")


class GateOptions(Options):
    """`harness.gate`."""

    allow_suite_change: StrictBool = Field(
        default=False, description="Compare runs whose task suites differ."
    )
    play: StrictBool = Field(default=True, description="Play the evidence the gate needs.")
    progress: StrictBool | None = Field(
        default=False, description="A live board (True), none (False), on a terminal (None)."
    )


class CompareOptions(Options):
    """`harness.compare`, and `harness compare --max-error-rate`."""

    max_error_rate: float = Field(
        default=defaults.MAX_ERROR_RATE,
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        description="Most share of episodes without evidence before nothing is decided (0 to 1).",
    )
    allow_suite_change: StrictBool = Field(
        default=False,
        description="Compare runs of different suites on the tasks both played; otherwise they "
        "are refused, as the gate refuses them.",
    )


class MiningOptions(Options):
    """`harness personas from-traces`, `harness fidelity`: seeds of what they draw at random."""

    seed: Seed = 0
    bootstrap: Annotated[int, Integral] = Field(
        default=1000, strict=True, ge=100, le=100_000, description="Bootstrap resamples."
    )


M = TypeVar("M", bound=Options)


class BadOptions(SpecError, ValueError):
    """Options an entry point refuses: one line per option, naming it and what was expected."""


class BadArgument(BadOptions, TypeError):
    """An argument of the wrong kind (a suite that is neither a `Suite` nor paths, a run that
    is neither a `RunResult` nor a run id): `BadOptions`, and the `TypeError` Python code
    expects of it."""


def refused(where: str, name: str, expected: str, given: Any) -> BadArgument:
    """The one-line error for argument `name` of `where` that is not `expected`: it names the
    argument, what was expected and the value given."""
    return BadArgument(
        [Problem(Location(where), name, f"expected {expected}, got {_shown(given)}")]
    )


def override_list(where: str, name: str, value: Any) -> list[str]:
    """`PATH=VALUE` overrides as a list; one string alone (whose letters would be read as
    overrides, one each) or a list of anything but strings is `BadOptions` naming `name`."""
    is_list = isinstance(value, Sequence) and not isinstance(value, str | bytes)
    if is_list and all(isinstance(item, str) for item in value):
        return list(value)
    raise refused(where, name, "a list of PATH=VALUE strings", value)


def overrides_of(where: str, overrides: Any, set_: Any) -> list[str]:
    """The overrides given as `overrides=` or by their older name `set=` (not both)."""
    if overrides and set_:
        raise BadOptions.at(
            Location(where), "overrides", "give overrides= or its older name set=, not both"
        )
    return override_list(where, "set" if set_ else "overrides", overrides or set_)


ModelOption: TypeAlias = ModelRef | dict[str, Any] | str
"""A model given to an entry point: a `ModelRef`, a mapping like `{"id": "openai/gpt-4.1-mini"}`,
or a model id."""


def model_ref(value: Any, where: Location, name: str) -> ModelRef:
    """`value` as a `ModelRef`, the one form a model has past an entry point. A scripted model
    whose rules file does not exist is refused here, before anything runs: else every call it
    would answer ends as an error of the run. `BadOptions` names `where`, the argument `name`
    and the file; `BadArgument` a value of the wrong kind."""
    if isinstance(value, ModelRef):
        model = value
    elif isinstance(value, str | dict):
        try:
            model = ModelRef.model_validate({"id": value} if isinstance(value, str) else value)
        except ValidationError as exc:
            error = exc.errors()[0]
            path = format_path(tuple(part for part in (name, *error["loc"]) if part != ""))
            raise BadOptions.at(where, path, error["msg"]) from None
    else:
        expected = "a ModelRef, a model id or a mapping with 'id:'"
        raise refused(where.source, name, expected, value)
    if missing := missing_scripts(model):
        keys, message = missing[0]
        path = format_path(tuple(part for part in (name, *keys) if part != ""))
        raise BadOptions.at(where, path, message)
    return model


_FLAGS = {"timeout_s": "--timeout"}
"""Options whose command line flag is not their name with dashes."""


def flag(name: str) -> str:
    """How the command line spells an option: `unsafe_checkers` -> `--unsafe-checkers`."""
    return _FLAGS.get(name, "--" + name.replace("_", "-"))


def checked(model: type[M], where: str, cli: bool = False, **values: Any) -> M:
    """`values` validated by `model`, or `BadOptions` whose lines name `where` (the function or
    command), each option (its name, or with `cli` its flag) and what was expected, and the
    value given."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            name = ".".join(str(part) for part in error["loc"]) or "options"
            option = flag(name) if cli else name
            problems.append(Problem(Location(where), option, _expected(model, error)))
        raise BadOptions(problems) from None


def problem_of(model: type[Options], name: str, value: Any) -> str | None:
    """What is wrong with one option's value by `model`'s rules (None: nothing): how a command
    line option is checked while it is parsed, by the rules the library call checks."""
    try:
        model.model_validate({name: value})
    except ValidationError as exc:
        return _expected(model, exc.errors()[0])
    return None


def _expected(model: type[Options], error: Any) -> str:
    """What an option expects, and the value given, in one line."""
    shown = _shown(error.get("input"))
    kind = error["type"]
    name = str(error["loc"][0]) if error["loc"] else ""
    field = model.model_fields.get(name)
    if kind == "extra_forbidden":
        known = ", ".join(model.model_fields)
        return f"unknown option (known: {known})"
    if kind == "bool_type":
        return f"expected True or False (a bool), got {shown}"
    if kind == "literal_error":
        return f"expected one of {', '.join(EXECUTORS)}, got {shown}"
    integer, bounds = _bounds(field)
    if kind in {"greater_than_equal", "less_than_equal"} and bounds:
        return f"expected {bounds if integer else 'a number ' + bounds}, got {shown}"
    if kind in {"int_type", "int_from_float", "int_parsing"} or (integer and "float" in kind):
        return f"expected an integer{' ' + bounds if bounds else ''}, got {shown}"
    if kind in {"float_type", "float_parsing", "finite_number"}:
        return f"expected a number{' ' + bounds if bounds else ''}, got {shown}"
    return f"{error['msg']}, got {shown}"


def _shown(given: Any) -> str:
    """A value as an error shows it: its repr, at most 60 characters."""
    shown = repr(given)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _bounds(field: Any) -> tuple[bool, str]:
    """(an integer?, '1 to 10,000') from a field's constraints (also inside `X | None`)."""
    if field is None:
        return False, ""
    items, types = list(field.metadata), [field.annotation]
    for arg in get_args(field.annotation):
        types.append(get_args(arg)[0] if get_args(arg) else arg)
        for info in getattr(arg, "__metadata__", ()):
            items += getattr(info, "metadata", [info])
    low = high = None
    for item in items:
        low = item.ge if getattr(item, "ge", None) is not None else low
        high = item.le if getattr(item, "le", None) is not None else high
    integer = int in types
    if low is not None and high is not None:
        return integer, f"{_number(low)} to {_number(high)}"
    if low is not None:
        return integer, f"{_number(low)} or more"
    return integer, ""


def _number(value: float) -> str:
    """10000 -> '10,000', 86400.0 -> '86,400', 0.01 -> '0.01'."""
    return f"{int(value):,}" if float(value).is_integer() else str(value)

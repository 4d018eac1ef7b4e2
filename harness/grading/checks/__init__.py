"""One module per check kind: its spec model, its `references()` and its handler, registered
together with `@register_check(SpecModel)`. Adding a kind is one new module, named in
`harness.specs.checks.BUILTIN_KINDS` (or, for a plug-in, in a `harness.checks` entry point).
The kind's class says what it needs (`uses_judge`, `runs_code`, `references()`) and when it
passes (`passes_when`); the rest of the harness asks it (`uses_judge(...)`, `runs_code(...)`,
`kind_table()`), never names it.

A handler is `(spec, transcript, context) -> Finding` (or an `(outcome, reason)` pair), sync or
async. The context gives what some kinds need: the task, and the model runtime for judges. A
handler that calls models reports their usage in `Finding.usage` (optional): it is stored with
the check's result and counted in the episode's cost (`Verdict.judge_usage`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.grading.result import CheckResult, Finding
from harness.models import ModelRuntime
from harness.registry import Registry
from harness.specs.agent import ModelRef
from harness.specs.checks import BUILTIN_KINDS, CHECK_KINDS, CheckBase, kind_name, register_kind
from harness.specs.task import Task
from harness.transcript import Side, Transcript

if TYPE_CHECKING:
    from harness.domains import Environment


@dataclass
class CheckContext:
    """What grading one episode may use besides its transcript."""

    task: Task
    runtime: ModelRuntime = field(default_factory=ModelRuntime)
    judge_model: ModelRef | None = None
    # Checker code may run without OS isolation where there is none (`--unsafe-checkers`, a
    # grade node's `sandbox: none`); otherwise it is refused.
    unsafe_checkers: bool = False
    # the domain class the suite resolved for the task (None: resolve it from `task.domain`)
    domain: type[Environment] | None = None


Handler = Callable[[Any, Transcript, CheckContext], Any]
# No modules to import here: a spec's handler was registered when its model's module was imported.
HANDLERS: Registry[Handler] = Registry("check kind")


def register_check(kind: str | type[CheckBase]) -> Callable[[Handler], Handler]:
    """Decorator for a check kind's handler. Given the kind's spec model, it also registers the
    model as a kind tasks can list, so a kind module registers its model and handler at once;
    given a kind's name, only the handler."""
    if isinstance(kind, str):
        return HANDLERS.register(kind)
    return HANDLERS.register(kind_name(register_kind(kind)))


async def run_check(spec: CheckBase, transcript: Transcript, context: CheckContext) -> CheckResult:
    """Run one check; a handler that raises gives an `error` result, never a fail."""
    kind: str = spec.kind  # type: ignore[attr-defined]
    handler = HANDLERS.get(kind)
    try:
        if handler is None:
            raise LookupError(f"no handler registered for check kind '{kind}'")
        found = handler(spec, transcript, context)
        if inspect.isawaitable(found):
            found = await found
        if not isinstance(found, Finding):
            found = Finding(*found)
    except Exception as exc:
        found = Finding("error", f"check crashed: {type(exc).__name__}: {exc}")
    score = found.score if found.score is not None else float(found.outcome == "pass")
    return CheckResult(
        name=spec.label(),
        kind=kind,
        outcome=found.outcome,
        score=score,
        reason=found.reason,
        error_side=found.error_side if found.outcome == "error" else None,
        hard=spec.hard,
        weight=spec.weight,
        diagnostic=spec.diagnostic,
        sandbox=found.sandbox,
        sandbox_limits=found.limits,
        usage=found.usage,
    )


def error_side(results: list[CheckResult]) -> Side:
    """The side to blame for undecided checks: the judge only when every one was a judge's."""
    sides = {r.error_side for r in results}
    return Side.JUDGE if sides == {Side.JUDGE} else Side.CHECKER


KindRef = str | CheckBase | type[CheckBase]


def kind_model(kind: KindRef) -> type[CheckBase] | None:
    """The class of a check kind, from its name (a stored result's `kind`), a check or the
    class itself; None for a name no module registered (a plug-in no longer installed)."""
    if isinstance(kind, str):
        return CHECK_KINDS.get(kind)
    return kind if isinstance(kind, type) else type(kind)


def uses_judge(kind: KindRef) -> bool:
    """Whether checks of this kind are decided by a judge model (its class's `uses_judge`)."""
    model = kind_model(kind)
    return model is not None and model.uses_judge


def runs_code(kind: KindRef) -> bool:
    """Whether checks of this kind run code the task ships (its class's `runs_code`)."""
    model = kind_model(kind)
    return model is not None and model.runs_code


def needs_run_judge(check: CheckBase) -> bool:
    """Whether a check is decided by the run's judge: its kind uses a judge and the check names
    no model of its own (in a `model` field, as `llm_judge` does)."""
    return uses_judge(check) and getattr(check, "model", None) is None


def kind_summary(kind: KindRef) -> str:
    """When a check of this kind passes, in one line: its `passes_when`, else the first
    paragraph of its class's docstring, else its name."""
    model = kind_model(kind)
    if model is None:
        return str(kind)
    text = model.passes_when or (model.__doc__ or "").strip().split("\n\n")[0]
    return " ".join(text.split()) or kind_name(model)


def kind_table(kinds: tuple[str, ...] = BUILTIN_KINDS) -> str:
    """The Markdown table of check kinds on docs/guide/graders.md: each kind's name and
    `kind_summary`, in the order given (by default the built-in kinds')."""
    rows = ["| kind | passes when |", "| --- | --- |"]
    for kind in kinds:
        summary = kind_summary(kind).replace("|", "\\|")
        rows.append(f"| `{kind}` | {summary} |")
    return "\n".join(rows) + "\n"

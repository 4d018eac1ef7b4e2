"""One module per check kind: its spec model, its `references()` and its handler, registered
together with `@register_check(SpecModel)`. Adding a kind is one new module, named in
`harness.specs.checks.BUILTIN_KINDS` (or, for a plug-in, in a `harness.checks` entry point).

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
from harness.specs.checks import CheckBase, kind_name, register_kind
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

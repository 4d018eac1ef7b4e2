"""One module per check kind; each registers a handler returning the same `CheckResult`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.grading.result import CheckResult, Outcome
from harness.specs.checks import CheckBase
from harness.transcript import Transcript

Handler = Callable[[Any, Transcript], tuple[Outcome, str]]
HANDLERS: dict[str, Handler] = {}


def register_check(kind: str) -> Callable[[Handler], Handler]:
    """Register the handler of a check kind: `(spec, transcript) -> (outcome, reason)`."""

    def decorator(handler: Handler) -> Handler:
        HANDLERS[kind] = handler
        return handler

    return decorator


def run_check(spec: CheckBase, transcript: Transcript) -> CheckResult:
    """Run one check; a handler that raises gives an `error` result, never a fail."""
    from harness.grading.checks import state, text, tool_called  # noqa: F401  (register)

    kind: str = spec.kind  # type: ignore[attr-defined]
    try:
        outcome, reason = HANDLERS[kind](spec, transcript)
    except Exception as exc:
        outcome, reason = "error", f"check crashed: {type(exc).__name__}: {exc}"
    return CheckResult(
        name=spec.label(),
        kind=kind,
        outcome=outcome,
        score=1.0 if outcome == "pass" else 0.0,
        reason=reason,
        hard=spec.hard,
        weight=spec.weight,
        diagnostic=spec.diagnostic,
    )

"""One module per check kind; each registers a handler returning the same `CheckResult`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.grading.result import CheckResult, Outcome
from harness.registry import Registry
from harness.specs.checks import CheckBase
from harness.transcript import Transcript

Handler = Callable[[Any, Transcript], tuple[Outcome, str]]
HANDLERS: Registry[Handler] = Registry(
    "check kind",
    tuple(f"harness.grading.checks.{kind}" for kind in ("state", "text", "tool_called")),
)
register_check = HANDLERS.register  # a handler: `(spec, transcript) -> (outcome, reason)`


def run_check(spec: CheckBase, transcript: Transcript) -> CheckResult:
    """Run one check; a handler that raises gives an `error` result, never a fail."""
    kind: str = spec.kind  # type: ignore[attr-defined]
    handler = HANDLERS.get(kind)
    try:
        if handler is None:
            raise LookupError(f"no handler registered for check kind '{kind}'")
        outcome, reason = handler(spec, transcript)
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

"""`harness traces to-tasks` as one library call: calls -> conversations -> clusters -> tasks."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from harness.domains import Environment, resolve_domain
from harness.imports import is_reference, split_reference
from harness.production.calls import CallRecord, Filters, Unreadable
from harness.production.clusters import cluster
from harness.production.convert import TaskOptions, Written, redacted, write_tasks
from harness.production.reconstruct import conversations
from harness.secrets import memoized, redact_data, redactor


def domain_for_tasks(reference: str, out: Path, base: Path) -> tuple[str, type[Environment]]:
    """The domain as the task files in `out` must name it (a `file.py:Class` given relative to
    `base` becomes relative to `out`), and its class; `UnknownDomain` when it names none."""
    found = resolve_domain(reference, base)
    if not is_reference(reference):
        return reference, found
    module, name = split_reference(reference)
    if not module.endswith(".py"):
        return reference, found
    path = (base / module).resolve()
    return f"{Path(os.path.relpath(path, out.resolve())).as_posix()}:{name}", found


def redacted_calls(calls: Iterable[CallRecord]) -> Iterator[CallRecord]:
    """The calls with every string production wrote (inputs, output, exception, feedback,
    names) through `harness.secrets.redact`, as they stream: what a task derives from them (a
    check's regex of what the user said, say) never sees a key, only its placeholder."""
    masked = memoized(redactor())
    for call in calls:
        yield call.model_copy(
            update={
                "op_name": masked(call.op_name),
                "display_name": masked(call.display_name) if call.display_name else None,
                "inputs": redact_data(call.inputs, masked),
                "output": redact_data(call.output, masked),
                "exception": masked(call.exception) if call.exception else call.exception,
                "feedback": redact_data(call.feedback, masked),
            }
        )


def to_tasks(
    calls: Iterable[CallRecord],
    filters: Filters,
    out: Path,
    options: TaskOptions,
    force: bool = False,
) -> Written:
    """Convert the calls into task files in `out`; what could not be used is in `unreadable`,
    and the sessions of unknown quality that made no success task are in `notes`."""
    problems: list[Unreadable] = []
    left_out: list[str] = []
    calls = redacted_calls(calls)  # a check built from a masked value holds the mask
    clusters = cluster(conversations(calls, problems, options.error_values), filters, left_out)
    written = write_tasks(clusters, out, options, force)
    written.unreadable = redacted(problems) + written.unreadable
    written.notes += redacted([Unreadable("sessions", line) for line in left_out])
    return written

"""Weave tracing for the harness: one small facade over a `WeaveClient`.

With a W&B project the client is `weave.init(project)`; without one it writes to the offline
SQLite store (`harness.tracing.local_server`), so the same code path records and reads traces on
a laptop and in CI. Importing this package does not import weave (about a second); opening a
tracer does.

- `spans`: the `Tracer` and `child_span`, how spans are recorded.
- `clients`: opening a weave client, online or on the local store; `record_locally(path)`, for
  a user's own app to record its traces offline.
- `local_writer`: the harness's own spans written straight into the local store, in batches,
  as weave would have written them, without importing weave.
- `open_run_tracer` (here, so that neither of those two imports the other): what a run records
  with.
- `local_server` (with `local_objects`, `local_db`): the local store, a weave trace server.
- `query`: the calls filter and query language the local store interprets.
"""

from __future__ import annotations

from pathlib import Path

from harness.defaults import TRACE_STORE
from harness.tracing.clients import open_local_client, open_tracer, record_locally
from harness.tracing.spans import NO_TRACER, Span, SpanResult, Tracer, child_span

__all__ = [
    "NO_TRACER",
    "Span",
    "SpanResult",
    "Tracer",
    "child_span",
    "open_local_client",
    "open_run_tracer",
    "open_tracer",
    "record_locally",
]


def open_run_tracer(project: str | None = None, store: Path = TRACE_STORE) -> Tracer:
    """The tracer a run records with: on a W&B project, weave's client (`open_tracer`); on the
    local store, the direct writer (`local_writer`), which records the harness's own spans,
    plain data only, without importing weave."""
    if project is not None:
        return open_tracer(project, store)
    from harness.tracing.local_writer import LocalTracer

    return LocalTracer(store)

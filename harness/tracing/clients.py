"""Opening a weave client: on a W&B project (online), or on the local trace store (offline).

weave is imported inside these functions (about a second), after the environment is set so that
neither weave nor wandb reports errors or starts the other by itself.
"""

from __future__ import annotations

import atexit
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.defaults import TRACE_STORE
from harness.tracing.spans import Tracer

if TYPE_CHECKING:
    from typing_extensions import TypeIs
    from weave.trace.op import Op
    from weave.trace.weave_client import WeaveClient

LOCAL_ENTITY = "local"
LOCAL_PROJECT = "harness"


def open_tracer(project: str | None = None, store: Path = TRACE_STORE) -> Tracer:
    """A tracer on the W&B project `entity/project` (online, needs `WANDB_API_KEY`), or with
    `project=None` on the local SQLite store at `store`."""
    _quiet_environment()
    if project is None:
        return Tracer(open_local_client(store))
    import weave
    from weave.wandb_interface.context import get_wandb_auth_context

    if get_wandb_auth_context() is None:  # weave.init would prompt for a login and wait
        raise RuntimeError(
            f"tracing to {project} needs W&B credentials: set WANDB_API_KEY or run `wandb login`"
        )
    client = weave.init(project)
    _fast_op_check()
    return Tracer(client)


def open_local_client(store: Path = TRACE_STORE) -> WeaveClient:
    """A weave client on the local store, made weave's global client (which feedback and ref
    reads need); also for reading traces back."""
    _quiet_environment()
    # A call link would point at wandb.ai, where local traces are not.
    os.environ.setdefault("WEAVE_PRINT_CALL_LINK", "false")
    from weave.trace.context import weave_client_context
    from weave.trace.weave_client import WeaveClient

    _fast_op_check()

    from harness.tracing.local_server import LocalTraceServer

    store.parent.mkdir(parents=True, exist_ok=True)
    client = WeaveClient(
        LOCAL_ENTITY,
        LOCAL_PROJECT,
        # the part of weave's server interface its client calls (see local_server), not all
        LocalTraceServer(store),  # type: ignore[arg-type]
        ensure_project_exists=False,
    )
    # weave keeps the first global client it is given; replace it explicitly.
    weave_client_context.set_weave_client_global(None)
    weave_client_context.set_weave_client_global(client)
    return client


def record_locally(store: Path | str = TRACE_STORE, patch: bool = True) -> Tracer:
    """Record your own app's traces in the local trace store, offline: call it once at start-up,
    instead of `weave.init`. Your `@weave.op` functions, `weave.thread(...)` sessions and feedback
    then land in `store`, and with `patch` the libraries weave integrates (OpenAI, Anthropic, ...)
    are patched as `weave.init` patches them: those already imported now, the others when they
    are imported. `harness traces to-tasks --source local --trace-store STORE` reads them back.

    Returns the tracer; `close()` it (or use it in a `with` block) to flush at the end. A process
    killed mid-call loses only what weave had not yet written, and its calls left open are closed
    as interrupted when the store is next opened."""
    tracer = Tracer(open_local_client(Path(store)))
    if patch:
        from weave.integrations.patch import implicit_patch, register_import_hook

        implicit_patch()
        register_import_hook()
    atexit.register(tracer.close)
    return tracer


def _fast_op_check() -> None:
    """weave 0.54 asks `isinstance(value, Op)` of every value it records, a runtime-protocol
    check that costs tens of microseconds on Python 3.11 (3.12 caches it); plain data, which is
    never an op, is answered at once. Tracing a run costs about a third less."""
    import weave.trace.weave_client as weave_client

    original = weave_client.is_op
    if sys.version_info >= (3, 12) or getattr(original, "plain_data_first", False):
        return
    plain = {str, int, float, bool, type(None), dict, list, tuple}

    def is_op(obj: Any) -> TypeIs[Op[Any, Any]]:
        return type(obj) not in plain and original(obj)

    is_op.plain_data_first = True  # type: ignore[attr-defined]
    weave_client.is_op = is_op


def _quiet_environment() -> None:
    """Before weave is imported: no error reports to Sentry, and wandb does not start weave."""
    os.environ.setdefault("WANDB_ERROR_REPORTING", "false")
    os.environ.setdefault("WANDB_DISABLE_WEAVE", "true")

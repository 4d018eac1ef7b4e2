"""`harness view`: browse the results store in a web browser, from this machine only."""

from __future__ import annotations

from typing import Annotated

import typer

from harness import defaults
from harness.cli._common import StoreOpt, fail, user_errors


def view(
    store: StoreOpt = defaults.RESULTS_STORE,  # type: ignore[assignment]  # typer parses it
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port on 127.0.0.1 (0: any free port).")
    ] = 8765,
) -> None:
    """Serve every run's report page, with filters (variant, task, tag, verdict, end reason)
    and search in transcripts, on http://127.0.0.1:PORT/ until Ctrl-C. Read-only."""
    from harness.api.stored import open_store
    from harness.view import bind, serve

    with user_errors():
        open_store(store).close()
    try:
        sock = bind(port)
    except OSError as exc:
        fail(f"harness view: cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}")
    typer.echo(f"harness view: http://127.0.0.1:{sock.getsockname()[1]}/ (read-only; Ctrl-C stops)")
    serve(store, sock)

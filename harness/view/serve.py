"""Serving the viewer with uvicorn on a socket bound to 127.0.0.1 only: the results store is
never offered to another machine."""

from __future__ import annotations

import socket

from harness.store_location import StoreTarget

HOST = "127.0.0.1"


def bind(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1 (`port` 0: any free port); OSError when it is taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError:
        sock.close()
        raise
    sock.listen(64)
    return sock


def serve(store: StoreTarget, sock: socket.socket) -> None:
    """Serve the viewer on the socket until interrupted (Ctrl-C); it answers only requests
    whose Host is this machine on the socket's port."""
    import uvicorn

    from harness.view.app import make_app

    config = uvicorn.Config(
        make_app(store, port=sock.getsockname()[1]), log_level="warning", access_log=False
    )
    uvicorn.Server(config).run(sockets=[sock])

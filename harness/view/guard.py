"""What keeps another web site from reading the viewer through the user's browser: a page of
DNS rebinding (evil.example resolved to 127.0.0.1) reaches the server with its own Host header,
so any other Host gets 403; and a Content-Security-Policy lets only the pages' own inline
script run, so text that got into a page cannot run as script."""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from harness.report.html.render import script_hashes

LOCAL_NAMES = ("127.0.0.1", "localhost", "[::1]")


def allowed_hosts(port: int) -> frozenset[str]:
    """The Host headers of this machine's addresses on `port`: `name:port`, and the bare name
    only on port 80, where browsers leave the port out. Starlette's TrustedHostMiddleware
    ignores the port, which would let a site on another local port in."""
    hosts = {f"{name}:{port}" for name in LOCAL_NAMES}
    if port == 80:
        hosts.update(LOCAL_NAMES)
    return frozenset(hosts)


def content_security_policy() -> str:
    """Same-origin everything; scripts by hash only; inline styles (the pages' stylesheet and
    the charts' style attributes); data: images (the icon); no plugins, <base> or framing."""
    return "; ".join(
        [
            "default-src 'self'",
            "script-src " + " ".join(script_hashes()),
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data:",
            "object-src 'none'",
            "base-uri 'none'",
            "frame-ancestors 'none'",
        ]
    )


class LocalOnly:
    """ASGI middleware: 403 unless the request's one Host header is in `hosts`."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str]) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = [value for name, value in scope["headers"] if name == b"host"]
            if len(given) != 1 or given[0].decode("latin-1").lower() not in self.hosts:
                await PlainTextResponse("Forbidden: unknown Host", 403)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class SecurityHeaders:
    """ASGI middleware: the Content-Security-Policy on every response, the 403s included."""

    def __init__(self, app: ASGIApp, policy: str) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["Content-Security-Policy"] = self.policy
            await send(message)

        await self.app(scope, receive, send_with_headers)

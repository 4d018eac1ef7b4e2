"""Headless Chromium for the tests, the benchmark and the docs' screenshot: Debian's
`chromium` package driven by Playwright's Python client (no browser download: the executable is
given), with the flags that work as root on a closed network, a fresh profile each time, and
every JavaScript error collected."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Page

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def missing() -> str:
    """Why no browser test can run here ('' when they can)."""
    if not CHROMIUM.is_file():
        return f"{CHROMIUM} is absent (apt-get install chromium; .ci/run installs it)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is absent (pip install -e '.[dev]')"
    return ""


@dataclass
class Browser:
    """A page, and the JavaScript errors seen so far (console errors and uncaught ones)."""

    page: Page
    errors: list[str] = field(default_factory=list)


@contextmanager
def chromium(profile: Path, width: int = 1280, height: int = 900) -> Iterator[Browser]:
    """A headless Chromium page with a fresh profile in `profile`."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        context = driver.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            headless=True,
            args=FLAGS,
            viewport={"width": width, "height": height},
        )
        try:
            page = context.pages[0] if context.pages else context.new_page()
            browser = Browser(page)
            page.on(
                "console",
                lambda message: message.type == "error" and browser.errors.append(message.text),
            )
            page.on("pageerror", lambda error: browser.errors.append(str(error)))
            yield browser
        finally:
            context.close()

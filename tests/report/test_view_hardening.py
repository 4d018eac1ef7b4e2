"""The viewer against a DNS-rebinding page (issue 27): only requests addressed to 127.0.0.1,
localhost or [::1] on the served port are answered, and every response carries a
Content-Security-Policy under which only the pages' own inline script runs."""

from __future__ import annotations

import base64
import hashlib
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from harness.store import Store
from harness.view import make_app
from tests.conftest import ROOT
from tests.helpers.browser import chromium, missing
from tests.report.test_first_hour_report import add_run

needs_browser = pytest.mark.skipif(bool(missing()), reason=missing() or "a browser is here")

PORT = 8765
GOOD_HOSTS = [f"127.0.0.1:{PORT}", f"localhost:{PORT}", f"[::1]:{PORT}", f"LocalHost:{PORT}"]
BAD_HOSTS = [
    "evil.example",
    f"evil.example:{PORT}",
    "127.0.0.1.evil.example",
    f"127.0.0.1.evil.example:{PORT}",
    f"127.0.0.1:{PORT + 1}",  # another local port: another site on this machine
    "127.0.0.1",  # no port: port 80, not this one
    "localhost",
    "",
]


class InlineScripts(HTMLParser):
    """The text of every inline script a browser would run (no src, a JavaScript type): the
    episodes' `text/x-episode` blocks are data, which CSP does not govern."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.scripts: list[str] = []
        self._open: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "script":
            return
        found = dict(attrs)
        kind = (found.get("type") or "").lower()
        if "src" not in found and kind in ("", "text/javascript", "module"):
            self._open = []

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._open.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._open is not None:
            self.scripts.append("".join(self._open))
            self._open = None


def inline_script_hashes(html: str) -> list[str]:
    parser = InlineScripts()
    parser.feed(html)
    parser.close()
    return [
        "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"
        for text in parser.scripts
    ]


def script_sources(policy: str) -> list[str]:
    directives = dict(
        part.strip().split(" ", 1) for part in policy.split(";") if " " in part.strip()
    )
    return directives["script-src"].split()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    results = Store(tmp_path / "results.db")
    yield results
    results.close()


@pytest.fixture
def client(store: Store) -> TestClient:
    return TestClient(make_app(store.path, port=PORT), base_url=f"http://127.0.0.1:{PORT}")


@pytest.mark.parametrize("host", BAD_HOSTS)
def test_a_foreign_host_gets_403_and_no_transcript(
    store: Store, client: TestClient, host: str
) -> None:
    run_id = add_run(store, "prod", {"task-0": False})
    for path in ("/", f"/runs/{run_id}", "/episodes?q=TRANSCRIPT"):
        answer = client.get(path, headers={"Host": host})
        assert answer.status_code == 403, (host, path)
        assert "TRANSCRIPT-TEXT" not in answer.text and run_id not in answer.text
        assert "script-src" in answer.headers["content-security-policy"]


@pytest.mark.parametrize("host", GOOD_HOSTS)
def test_this_machine_on_the_served_port_gets_the_pages(
    store: Store, client: TestClient, host: str
) -> None:
    run_id = add_run(store, "prod", {"task-0": False})
    answer = client.get(f"/runs/{run_id}", headers={"Host": host})
    assert answer.status_code == 200
    assert "TRANSCRIPT-TEXT prod task-0" in answer.text


def test_port_80_allows_the_bare_names(store: Store) -> None:
    client = TestClient(make_app(store.path, port=80), base_url="http://127.0.0.1")
    for host in ("127.0.0.1", "localhost", "[::1]", "127.0.0.1:80"):
        assert client.get("/", headers={"Host": host}).status_code == 200, host
    assert client.get("/", headers={"Host": "127.0.0.1:8080"}).status_code == 403


def test_every_page_carries_a_csp_that_hashes_its_inline_scripts(
    store: Store, client: TestClient
) -> None:
    a = add_run(store, "prod", {"task-0": True, "task-1": False})
    b = add_run(store, "prod", {"task-0": True, "task-1": True})
    pages = {
        "/": 200,
        f"/runs/{a}": 200,
        f"/runs/{a}?against={b}&verdict=fail": 200,
        "/episodes?q=TRANSCRIPT": 200,
        "/runs/nope": 404,
    }
    for path, status in pages.items():
        answer = client.get(path)
        assert answer.status_code == status, path
        policy = answer.headers["content-security-policy"]
        for directive in (
            "default-src 'self'",
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data:",
            "object-src 'none'",
            "base-uri 'none'",
            "frame-ancestors 'none'",
        ):
            assert directive in policy, (path, directive)
        allowed = script_sources(policy)
        assert all(source.startswith("'sha256-") for source in allowed), allowed
        hashes = inline_script_hashes(answer.text)
        assert hashes, path  # the page's script is inline: it is parsed, hashed and allowed
        assert set(hashes) <= set(allowed), path
    assert "content-security-policy" in client.post("/").headers  # a 405 too


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """`harness view` on a free port over a store of one failing and one passing episode; its
    base URL, the run and its port."""
    results = Store(tmp_path / "results.db")
    run_id = add_run(results, "prod", {"task-0": True, "task-1": False, "task-2": False})
    results.close()
    command = [sys.executable, "-m", "harness", "view", "--store", str(tmp_path / "results.db")]
    process = subprocess.Popen(
        [*command, "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline() if process.stdout else ""
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert found, line + (process.stderr.read() if process.poll() is not None else "")
        yield found.group(), run_id, found.group(1)
    finally:
        process.terminate()
        process.wait(timeout=30)


def status_with_host(url: str, host: str) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers={"Host": host})) as got:
            return got.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_served_viewer_checks_the_host_against_its_port(
    served: tuple[str, str, str],
) -> None:
    url, run_id, port = served
    assert status_with_host(url + f"runs/{run_id}", f"localhost:{port}") == 200
    assert status_with_host(url + f"runs/{run_id}", "evil.example") == 403
    assert status_with_host(url + f"runs/{run_id}", f"127.0.0.1:{int(port) + 1}") == 403


@needs_browser
def test_the_run_page_filters_and_opens_episodes_under_the_csp(
    served: tuple[str, str, str], tmp_path: Path
) -> None:
    url, run_id, _ = served
    with chromium(tmp_path / "profile") as browser:
        page = browser.page
        page.goto(url + f"runs/{run_id}")
        form = page.locator("#episodes-0 form.filters")
        form.locator("select[name=verdict]").select_option("fail")
        form.locator("button[type=submit]").click()
        page.wait_for_url(re.compile(r"verdict=fail"))
        assert page.inner_text("#episodes-0 .count") == "2 of 3 episodes shown"
        row = page.locator("#episodes-0 details.ep[data-task='task-1']")
        assert row.locator("[data-fill]").inner_html() == ""  # kept as inert text till opened
        row.locator("summary").click()
        # the body is filled in by the page's own script: it ran under the policy
        assert "TRANSCRIPT-TEXT prod task-1" in row.locator(".chat").inner_text()
        assert browser.errors == []

        # a script that got into the page some other way does not run
        page.evaluate(
            """() => { const s = document.createElement("script");
            s.textContent = "window.injected = true;"; document.body.append(s); }"""
        )
        assert page.evaluate("() => window.injected === true") is False
    assert len(browser.errors) == 1 and "Content Security Policy" in browser.errors[0]

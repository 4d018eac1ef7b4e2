"""The viewer's web application (Starlette): GET pages only, each reading the results store
through its own connection, so that the store is never written and a page never waits on
another."""

from __future__ import annotations

import threading
from collections.abc import Callable

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from harness.report.html.filters import EpisodeFilter
from harness.report.html.page import build_report
from harness.report.html.render import render, report_html
from harness.report.html.tasks import RunTasks, run_tasks
from harness.report.html.trends import trends
from harness.store import RunInfo, Store
from harness.store_location import StoreLocation, StoreTarget
from harness.view.guard import LocalOnly, SecurityHeaders, allowed_hosts, content_security_policy
from harness.view.pages import run_lines, search


class TaskCache:
    """Each run's tasks, read from their files once (the slow part of a page), by thread-safe
    lookup; a run's recorded task files do not change."""

    def __init__(self) -> None:
        self._tasks: dict[str, RunTasks] = {}
        self._lock = threading.Lock()

    def __call__(self, info: RunInfo) -> RunTasks:
        with self._lock:
            if info.id not in self._tasks:
                self._tasks[info.id] = run_tasks(info)
            return self._tasks[info.id]


def make_app(target: StoreTarget, *, port: int) -> Starlette:
    """The viewer over one results store, answering only requests addressed to this machine on
    `port`, the port it is served on (a DNS-rebinding page's Host is refused)."""
    location = StoreLocation.of(target)
    tasks = TaskCache()

    def with_store(
        page: Callable[[Request, Store], HTMLResponse],
    ) -> Callable[[Request], HTMLResponse]:
        def endpoint(request: Request) -> HTMLResponse:
            store = Store(location)
            try:
                return page(request, store)
            finally:
                store.close()

        return endpoint

    def not_found(message: str) -> HTMLResponse:
        html = render("message.html.j2", title="Not found", message=message, mode="view")
        return HTMLResponse(html, status_code=404)

    def index(request: Request, store: Store) -> HTMLResponse:
        lines = run_lines(store)
        return HTMLResponse(
            render(
                "index.html.j2",
                title="harness results",
                mode="view",
                store=str(location),
                runs=lines,
                variants=sorted({line.info.variant for line in lines}),
                trends=trends(store),
            )
        )

    def run_page(request: Request, store: Store) -> HTMLResponse:
        run_id = request.path_params["run_id"]
        against = request.query_params.get("against") or None
        for wanted in (run_id, against):
            if wanted is not None and store.run(wanted) is None:
                return not_found(f"No run {wanted} in {location}.")
        page = build_report(store, run_id, against, tasks)
        flt = EpisodeFilter.from_query(dict(request.query_params))
        return HTMLResponse(report_html(page, "view", flt if flt.active else None))

    def episodes(request: Request, store: Store) -> HTMLResponse:
        flt = EpisodeFilter.from_query(dict(request.query_params))
        found = search(store, flt, tasks)
        return HTMLResponse(
            render(
                "search.html.j2",
                title="Episodes",
                mode="view",
                flt=flt,
                episodes=found.episodes,
                shown=found.shown,
                total=found.total,
                choices=found.choices,
                cut=found.cut,
            )
        )

    return Starlette(
        routes=[
            Route("/", with_store(index), methods=["GET"]),
            Route("/runs/{run_id}", with_store(run_page), methods=["GET"]),
            Route("/episodes", with_store(episodes), methods=["GET"]),
        ],
        middleware=[
            Middleware(SecurityHeaders, policy=content_security_policy()),
            Middleware(LocalOnly, hosts=allowed_hosts(port)),
        ],
    )

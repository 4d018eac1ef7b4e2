"""`harness view`: a small local web server over the results store, read-only and reachable
from this machine only (127.0.0.1). Its pages are the report's (`harness.report.html`): every
run's page, with filters asked of the server, and a search of the episodes of every run."""

from harness.view.app import make_app
from harness.view.serve import bind, serve

__all__ = ["bind", "make_app", "serve"]

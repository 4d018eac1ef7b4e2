"""The sessions apps recorded with `record_locally` (the calls the harness did not record),
listed and rebuilt by the converter's own reconstruction, so that `traces list` and `traces show`
read a session exactly as `traces to-tasks` does. (The harness's own episodes: `episodes`.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.defaults import TRACE_STORE
from harness.production.calls import CallRecord, Filters, Unreadable, parse_time, read_client
from harness.production.reconstruct import Conversation, conversations
from harness.tracing import Tracer, open_local_client


@dataclass
class AppSession:
    """An app's recorded session (a thread, or the trace of a root call without one), rebuilt
    as a conversation by the converter's own reconstruction."""

    key: str  # "thread ID" or "trace ID"
    conversation: Conversation | None  # None: it could not be rebuilt, `problems` say why
    problems: list[Unreadable] = field(default_factory=list)
    ops: dict[str, str] = field(default_factory=dict)  # call id: op name, to name rated calls
    duration_s: float = 0.0


NOT_HARNESS = {  # a query for the calls the harness did not record
    "$expr": {
        "$not": [
            {
                "$contains": {
                    "input": {"$getField": "op_name"},
                    "substr": {"$literal": "/op/harness."},
                }
            }
        ]
    }
}


def _session_key(call: Any) -> str:
    """The session a call belongs to: its thread, else its trace (as `reconstruct` groups)."""
    return f"thread {call.thread_id}" if call.thread_id else f"trace {call.trace_id}"


@dataclass
class SessionRow:
    """One app session as `traces list` shows it: a thread, or the trace of a root call
    without one. An app that records a root call per turn has many roots in one thread; the
    session is what a person means by a conversation, and what `traces show` and `traces
    to-tasks` take, so it is one row."""

    key: str  # "thread ID" or "trace ID", as the converter names sessions
    call_id: str  # its first root call (`traces show` takes it, or the thread id)
    thread_id: str | None
    started_at: str  # its first root call's start
    ops: list[str] = field(default_factory=list)  # its root ops, each once, in order
    statuses: list[str] = field(default_factory=list)  # of its root calls
    last_at: str = ""  # its last root call's start: sessions are listed newest first by it
    feedback: int = 0  # feedback rows on any of its calls
    turns: int | None = None  # user turns, as `traces to-tasks` reads them; None: unreadable

    @property
    def status(self) -> str:
        """The session's status: the most telling of its root calls' (a session cut short or
        still running says so before one that failed, which says so before a success)."""
        order = ("interrupted", "running", "error", "descendant_error")
        return next((s for s in order if s in self.statuses), self.statuses[0])


def list_sessions(store: Path = TRACE_STORE, limit: int = 50) -> list[SessionRow]:
    """The `limit` most recent sessions of apps (calls the harness did not record), newest
    first: their root calls grouped by thread (else trace), their feedback counted on every
    call of the session, and their user turns counted as the converter reads them."""
    tracer = Tracer(open_local_client(store))
    try:
        client: Any = tracer.client
        sessions: dict[str, SessionRow] = {}
        # Every root call, as the local server's plain rows: through the weave client's call
        # objects, reading a few fields of 4,500 roots took 5 s.
        roots = client.server.calls_query_stream(
            {
                "project_id": client.project_id,
                "filter": {"trace_roots_only": True},
                "query": NOT_HARNESS,
                "sort_by": [{"field": "started_at", "direction": "asc"}],
            }
        )
        for call in roots:
            thread = call.thread_id or None
            key = f"thread {thread}" if thread else f"trace {call.trace_id}"
            started = str(call.started_at)
            session = sessions.setdefault(key, SessionRow(key, call.id, thread, started))
            op = call.op_name.split("/op/")[-1].split(":")[0]  # weave:///E/P/op/NAME:DIGEST
            session.ops += [] if op in session.ops else [op]
            status = ((call.summary or {}).get("weave") or {}).get("status", "")
            session.statuses.append(str(getattr(status, "value", status)))
            session.last_at = started
        newest = sorted(sessions.values(), key=lambda s: s.last_at, reverse=True)[:limit]
        threads = [s.thread_id for s in newest if s.thread_id]
        traces = [s.key.removeprefix("trace ") for s in newest if not s.thread_id]
        records = []
        for filters in (Filters(thread_ids=threads), Filters(trace_ids=traces)):
            if filters.thread_ids or filters.trace_ids:  # no ids would read every call
                records += list(read_client(client, filters))
    finally:
        tracer.close()
    shown = {s.key: s for s in newest}
    for record in records:
        key = f"thread {record.thread_id}" if record.thread_id else f"trace {record.trace_id}"
        if key in shown:
            shown[key].feedback += len(record.feedback)
    problems: list[Unreadable] = []
    for conversation in conversations(records, problems):
        if conversation.key in shown:
            session = shown[conversation.key]
            session.turns = (session.turns or 0) + len(conversation.user_texts())
    return newest


def _session_records(client: Any, session_id: str) -> list[CallRecord] | None:
    """The calls of the session `session_id` names: a thread id, or an app's root call id (or
    its last characters, as `traces list` shows it); None when it names no single one."""
    if list(client.get_calls(filter={"thread_ids": [session_id]}, limit=1)):
        return list(read_client(client, Filters(thread_ids=[session_id])))
    roots = [
        call
        for call in client.get_calls(filter={"trace_roots_only": True}, query=NOT_HARNESS)
        if call.id.endswith(session_id)
    ]
    if len(roots) != 1:
        return None
    root = roots[0]
    session = (
        Filters(thread_ids=[root.thread_id])
        if root.thread_id
        else Filters(trace_ids=[root.trace_id])
    )
    return list(read_client(client, session))


def _duration_s(records: list[CallRecord]) -> float:
    """From the first call's start to the last call's end."""
    starts = [t for r in records if (t := parse_time(r.started_at))]
    ends = [t for r in records if (t := parse_time(r.ended_at))]
    return (max(ends) - min(starts)).total_seconds() if starts and ends else 0.0


def find_session(store: Path, session_id: str) -> AppSession | None:
    """An app's session, by thread id or root call id (see `_session_records`), rebuilt as
    `harness traces to-tasks` rebuilds it; None when the id names no single session."""
    tracer = Tracer(open_local_client(store))
    try:
        records = _session_records(tracer.client, session_id)
    finally:
        tracer.close()
    if not records:
        return None
    problems: list[Unreadable] = []
    found = list(conversations(records, problems))
    if len(found) > 1:
        problems.append(Unreadable(_session_key(records[0]), f"{len(found)} conversations"))
    return AppSession(
        key=_session_key(records[0]),
        conversation=found[0] if len(found) == 1 else None,
        problems=problems,
        ops={r.id: r.op for r in records},
        duration_s=_duration_s(records),
    )

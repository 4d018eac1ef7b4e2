"""The offline Weave trace store: the trace-server methods a `WeaveClient` uses, on SQLite.

With no W&B project configured, traces go here, so that the same weave client records and reads
traces on a laptop and in CI. Only `harness.tracing` imports this module, inside its functions,
because it imports weave (slow to import).

What is implemented is what weave 0.54's `WeaveClient` calls while tracing (`create_call`,
`finish_call`), reading back (`get_calls`, `get_call`, `get`) and adding feedback; any other method
of `TraceServerClientInterface` is absent, so a client path that needs one fails with an
`AttributeError` instead of silently doing nothing. Requests arrive as the dicts the interface
types describe (stainless `TypedDict`s); responses are the interface's pydantic models.

Filtering of `calls_query_stream` / `calls_query_stats`:
- `filter`: `op_names` (a full op ref, a ref ending in `:*` for any version, or a bare op name),
  `call_ids`, `trace_ids`, `parent_ids`, `thread_ids`, `turn_ids`, `wb_run_ids`, `wb_user_ids`,
  `trace_roots_only`; `input_refs` / `output_refs` raise `ValueError`.
- `query`: a weave query expression (see `harness.tracing.query`), evaluated in Python on the
  rows the filter selected.
- `sort_by` on the columns `harness.tracing.query` lists (default `started_at` ascending),
  `limit`, `offset`.
- `include_feedback` puts the call's feedback rows in `summary.weave.feedback`; `summary.weave`
  also carries `status`, `latency_ms` and `trace_name` as the W&B server computes them.
- `columns` and `expand_columns` are accepted and ignored: every column comes back, refs unexpanded.
A call whose end arrived before its start is stored but not listed until its start arrives. A
call whose recording process died before it ended is closed on the next open with the status
`interrupted` (see `local_db`).
"""

from __future__ import annotations

import datetime
import json
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from weave.utils.ids import generate_id
from weave.vendor.weave_server_sdk.types import (
    CallEndParams,
    CallQueryStatsParams,
    CallQueryStatsResponse,
    CallReadParams,
    CallReadResponse,
    CallStartParams,
    CallStartResponse,
    CallStreamQueryParams,
    FeedbackCreateParams,
    FeedbackCreateResponse,
    FeedbackQueryParams,
    FeedbackQueryResponse,
)
from weave.vendor.weave_server_sdk.types.call_read_response import Call

from harness.tracing.local_db import INTERRUPTED, from_micros, micros, op_short
from harness.tracing.local_objects import LocalObjectServer
from harness.tracing.query import calls_order, calls_where, evaluate, get_path, sort_key

# The fields a feedback row has in a query result (weave's `Feedback` warns on any other).
_FEEDBACK_FIELDS = (
    "weave_ref",
    "creator",
    "feedback_type",
    "payload",
    "annotation_ref",
    "runnable_ref",
    "call_ref",
    "trigger_ref",
    "queue_id",
    "scorer_tags",
    "scorer_tag_reasons",
    "scorer_tag_confidences",
    "scorer_ratings",
    "scorer_rating_reasons",
    "scorer_rating_confidences",
    "span_agent_name",
    "span_agent_version",
    "span_status_code",
    "span_conversation_id",
    "span_trace_id",
    "scorer_trace_id",
    "wb_user_id",
)


class LocalTraceServer(LocalObjectServer):
    """A single-file SQLite trace server for `WeaveClient`; see the module docstring. Objects,
    files, tables and refs come from `LocalObjectServer`; calls and feedback are here."""

    # Calls

    def call_start(self, req: CallStartParams) -> CallStartResponse:
        """Insert a call, or complete the row its (earlier) end created."""
        start = req["start"]
        call_id = start.get("id") or generate_id()
        trace_id = start.get("trace_id") or call_id
        self._write(
            "INSERT INTO calls (project_id, id, trace_id, parent_id, thread_id, turn_id, op_name,"
            " op_short, display_name, started_at, attributes, inputs, wb_user_id, wb_run_id,"
            " wb_run_step, writer) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (project_id, id) DO UPDATE SET trace_id = excluded.trace_id,"
            " parent_id = excluded.parent_id, thread_id = excluded.thread_id,"
            " turn_id = excluded.turn_id, op_name = excluded.op_name,"
            " op_short = excluded.op_short, display_name = excluded.display_name,"
            " started_at = excluded.started_at, attributes = excluded.attributes,"
            " inputs = excluded.inputs, wb_user_id = excluded.wb_user_id,"
            " wb_run_id = excluded.wb_run_id, wb_run_step = excluded.wb_run_step,"
            " writer = excluded.writer",
            (
                start["project_id"],
                call_id,
                trace_id,
                start.get("parent_id"),
                start.get("thread_id"),
                start.get("turn_id"),
                start["op_name"],
                op_short(start["op_name"]),
                start.get("display_name"),
                micros(start["started_at"]),
                json.dumps(start["attributes"]),
                json.dumps(start["inputs"]),
                start.get("wb_user_id"),
                start.get("wb_run_id"),
                start.get("wb_run_step"),
                self.writer,
            ),
        )
        return CallStartResponse(id=call_id, trace_id=trace_id)

    def call_end(self, req: CallEndParams) -> None:
        """Record a call's end; it may arrive before the start (the client sends both from a
        thread pool), in which case the row waits for its start."""
        end = req["end"]
        self._write(
            "INSERT INTO calls (project_id, id, trace_id, started_at, ended_at, output, summary,"
            " exception, wb_run_step_end) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (project_id, id) DO UPDATE SET ended_at = excluded.ended_at,"
            " output = excluded.output, summary = excluded.summary,"
            " exception = excluded.exception, wb_run_step_end = excluded.wb_run_step_end",
            (
                end["project_id"],
                end["id"],
                end.get("trace_id"),
                micros(end.get("started_at")),
                micros(end["ended_at"]),
                json.dumps(end.get("output")),
                json.dumps(end["summary"]),
                end.get("exception"),
                end.get("wb_run_step_end"),
            ),
        )

    def call_read(self, req: CallReadParams) -> CallReadResponse:
        """One call by id, or `call=None`."""
        calls = self._select_calls(req["project_id"], {"call_ids": [req["id"]]})
        return CallReadResponse(call=calls[0] if calls else None)

    def calls_query_stream(self, req: CallStreamQueryParams) -> Iterator[Call]:
        """Calls matching the request; see the module docstring for what is supported."""
        return iter(
            self._select_calls(
                req["project_id"],
                req.get("filter") or {},
                query=req.get("query"),
                sort_by=req.get("sort_by"),
                limit=req.get("limit"),
                offset=req.get("offset"),
                include_feedback=bool(req.get("include_feedback")),
            )
        )

    def calls_query_stats(self, req: CallQueryStatsParams) -> CallQueryStatsResponse:
        """How many calls match the filter and query (`limit` caps the count)."""
        project_id, filter, limit = req["project_id"], req.get("filter") or {}, req.get("limit")
        if (query := req.get("query")) is not None:
            count = len(self._select_calls(project_id, filter, query=query, limit=limit))
        else:
            where, params = calls_where(project_id, filter)
            [row] = self._read(f"SELECT COUNT(*) AS count FROM calls WHERE {where}", params)
            count = row["count"] if limit is None else min(row["count"], limit)
        return CallQueryStatsResponse(count=count)

    def _select_calls(
        self,
        project_id: str,
        filter: Mapping[str, Any],
        *,
        query: Mapping[str, Any] | None = None,
        sort_by: Iterable[Mapping[str, object]] | None = None,
        limit: int | None = None,
        offset: int | None = None,
        include_feedback: bool = False,
    ) -> list[Call]:
        where, params = calls_where(project_id, filter)
        sql = f"SELECT * FROM calls WHERE {where} ORDER BY {calls_order(sort_by)}"
        # Without a query expression, SQLite pages; with one, Python filters then pages.
        if query is None and (limit is not None or offset):
            sql += " LIMIT ? OFFSET ?"
            params += [-1 if limit is None else limit, offset or 0]
        rows = self._read(sql, params)
        feedback = self._feedback_by_call(project_id, rows) if include_feedback else {}
        calls = [_call_from_row(row, feedback.get(row["id"])) for row in rows]
        if query is not None:
            calls = [c for c in calls if evaluate(query["$expr"], c.model_dump())]
            start = offset or 0
            calls = calls[start : None if limit is None else start + limit]
        return calls

    def _feedback_by_call(
        self, project_id: str, call_rows: list[sqlite3.Row]
    ) -> dict[str, list[dict[str, Any]]]:
        """The feedback rows on each of these calls, oldest first."""
        prefix = f"weave:///{project_id}/call/"
        refs = [prefix + row["id"] for row in call_rows]
        rows = self._read(
            f"SELECT weave_ref, row FROM feedback WHERE project_id = ? AND weave_ref IN"
            f" ({', '.join('?' * len(refs))}) ORDER BY created_at",
            [project_id, *refs],
        )
        by_call: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            by_call.setdefault(row["weave_ref"].removeprefix(prefix), []).append(
                json.loads(row["row"])
            )
        return by_call

    # Feedback

    def feedback_create(self, req: FeedbackCreateParams) -> FeedbackCreateResponse:
        """Store a feedback row (a reaction, a note, a score) on a ref."""
        feedback_id = req.get("id") or str(uuid.uuid4())
        created_at = datetime.datetime.now(datetime.UTC)
        row = {
            "id": feedback_id,
            "project_id": req["project_id"],
            **{field: req.get(field) for field in _FEEDBACK_FIELDS if field in req},
            "created_at": created_at.isoformat(),
        }
        self._write(
            "INSERT INTO feedback (project_id, id, weave_ref, created_at, row)"
            " VALUES (?, ?, ?, ?, ?)",
            (
                req["project_id"],
                feedback_id,
                req["weave_ref"],
                micros(created_at),
                json.dumps(row),
            ),
        )
        return FeedbackCreateResponse(
            id=feedback_id,
            created_at=created_at,
            payload=req["payload"],
            wb_user_id=req.get("wb_user_id") or "",
        )

    def feedback_query(self, req: FeedbackQueryParams) -> FeedbackQueryResponse:
        """Feedback rows matching `query`, sorted by any fields, paged; `fields` picks keys."""
        rows = [
            json.loads(row["row"])
            for row in self._read(
                "SELECT row FROM feedback WHERE project_id = ? ORDER BY created_at",
                (req["project_id"],),
            )
        ]
        if (query := req.get("query")) is not None:
            # the request as sent, with `$expr`: the SDK's type has the Python name, `expr`
            rows = [
                row
                for row in rows
                if evaluate(query["$expr"], row)  # type: ignore[typeddict-item]
            ]
        for sort in reversed(list(req.get("sort_by") or [])):
            rows.sort(key=_by_field(sort["field"]), reverse=sort["direction"] == "desc")
        total = len(rows)
        start = req.get("offset") or 0
        limit = req.get("limit")
        rows = rows[start : None if limit is None else start + limit]
        if fields := req.get("fields"):
            rows = [{f: row.get(f) for f in fields} for row in rows]
        return FeedbackQueryResponse(result=rows, total_count=total)


def _by_field(field: str) -> Callable[[Mapping[str, Any]], tuple[bool, Any]]:
    """The sort key of rows by one (dotted) field."""
    return lambda row: sort_key(get_path(row, field))


def _call_from_row(row: sqlite3.Row, feedback: list[dict[str, Any]] | None) -> Call:
    """A stored call as the server returns it, with `summary.weave` computed."""
    call = dict(row)
    short_name = call.pop("op_short")
    call.pop("writer", None)
    started_at, ended_at = call["started_at"], call["ended_at"]
    summary = json.loads(call["summary"]) if call["summary"] else {}
    if summary.get(INTERRUPTED):
        status = INTERRUPTED
    elif call["exception"] is not None:
        status = "error"
    elif ended_at is None:
        status = "running"
    elif summary.get("status_counts", {}).get("error"):
        status = "descendant_error"
    else:
        status = "success"
    summary["weave"] = {
        "status": status,
        "trace_name": call["display_name"] or short_name,
        "latency_ms": None if ended_at is None else (ended_at - started_at) // 1000,
    }
    if feedback is not None:
        summary["weave"]["feedback"] = feedback
    call["summary"] = summary
    for key in ("attributes", "inputs", "output"):
        call[key] = None if call[key] is None else json.loads(call[key])
    call["started_at"] = from_micros(started_at)
    call["ended_at"] = None if ended_at is None else from_micros(ended_at)
    return Call(**call)

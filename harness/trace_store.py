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
- `query`: a weave query expression (`$and $or $not $eq $gt $gte $lt $lte $in $contains`,
  operands `$getField` with dotted paths, `$literal`, `$convert`), evaluated in Python on the
  rows the filter selected.
- `sort_by` on the columns in `_SORTABLE` (default `started_at` ascending), `limit`, `offset`.
- `include_feedback` puts the call's feedback rows in `summary.weave.feedback`; `summary.weave`
  also carries `status`, `latency_ms` and `trace_name` as the W&B server computes them.
- `columns` and `expand_columns` are accepted and ignored: every column comes back, refs unexpanded.
A call whose end arrived before its start is stored but not listed until its start arrives.
"""

from __future__ import annotations

import datetime
import json
import operator
import sqlite3
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any

from weave.trace.errors import NotFoundError
from weave.trace.refs import ObjectRef, Ref, TableRef
from weave.trace.serialization.digest import (
    compute_file_digest,
    compute_object_digest_result,
    compute_row_digest,
    compute_table_digest,
)
from weave.trace_server_bindings.models import FileContentReadRes
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
    FileContentParams,
    FileCreateParams,
    FileCreateResponse,
    ObjectCreateParams,
    ObjectCreateResponse,
    ObjectReadParams,
    ObjectReadResponse,
    RefReadBatchParams,
    RefReadBatchResponse,
    TableCreateParams,
    TableCreateResponse,
    TableQueryParams,
    TableQueryResponse,
)
from weave.vendor.weave_server_sdk.types.call_read_response import Call
from weave.vendor.weave_server_sdk.types.object_read_response import Obj
from weave.vendor.weave_server_sdk.types.table_query_response import Row

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    project_id TEXT NOT NULL, id TEXT NOT NULL, trace_id TEXT, parent_id TEXT,
    thread_id TEXT, turn_id TEXT, op_name TEXT, op_short TEXT, display_name TEXT,
    started_at INTEGER, ended_at INTEGER, attributes TEXT, inputs TEXT, output TEXT,
    summary TEXT, exception TEXT, wb_user_id TEXT, wb_run_id TEXT, wb_run_step INTEGER,
    wb_run_step_end INTEGER,
    PRIMARY KEY (project_id, id)
);
CREATE INDEX IF NOT EXISTS calls_started ON calls (project_id, started_at);
CREATE INDEX IF NOT EXISTS calls_trace ON calls (project_id, trace_id);
CREATE INDEX IF NOT EXISTS calls_parent ON calls (project_id, parent_id);
CREATE INDEX IF NOT EXISTS calls_op ON calls (project_id, op_short);
CREATE TABLE IF NOT EXISTS objects (
    project_id TEXT NOT NULL, object_id TEXT NOT NULL, digest TEXT NOT NULL,
    version_index INTEGER NOT NULL, kind TEXT NOT NULL, base_object_class TEXT,
    leaf_object_class TEXT, val TEXT NOT NULL, created_at INTEGER NOT NULL,
    PRIMARY KEY (project_id, object_id, digest)
);
CREATE TABLE IF NOT EXISTS files (
    project_id TEXT NOT NULL, digest TEXT NOT NULL, content BLOB NOT NULL,
    PRIMARY KEY (project_id, digest)
);
CREATE TABLE IF NOT EXISTS tables (
    project_id TEXT NOT NULL, digest TEXT NOT NULL, row_digests TEXT NOT NULL,
    PRIMARY KEY (project_id, digest)
);
CREATE TABLE IF NOT EXISTS table_rows (
    project_id TEXT NOT NULL, digest TEXT NOT NULL, val TEXT NOT NULL,
    PRIMARY KEY (project_id, digest)
);
CREATE TABLE IF NOT EXISTS feedback (
    project_id TEXT NOT NULL, id TEXT NOT NULL, weave_ref TEXT NOT NULL,
    created_at INTEGER NOT NULL, row TEXT NOT NULL,
    PRIMARY KEY (project_id, id)
);
CREATE INDEX IF NOT EXISTS feedback_ref ON feedback (project_id, weave_ref);
"""

# Filter keys that select on one column by membership.
_FILTER_COLUMNS = {
    "call_ids": "id",
    "trace_ids": "trace_id",
    "parent_ids": "parent_id",
    "thread_ids": "thread_id",
    "turn_ids": "turn_id",
    "wb_run_ids": "wb_run_id",
    "wb_user_ids": "wb_user_id",
}
_SORTABLE = {
    "id",
    "trace_id",
    "parent_id",
    "op_name",
    "display_name",
    "started_at",
    "ended_at",
    "exception",
}
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
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_COMPARISONS = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}


class LocalTraceServer:
    """A single-file SQLite trace server for `WeaveClient`; see the module docstring.

    The client calls it from its background threads, so one connection is shared under a lock;
    WAL mode lets other processes read the file while this one writes.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        """Close the database; the server is unusable afterwards."""
        with self._lock:
            self._db.close()

    def _write(self, sql: str, params: Sequence[Any]) -> None:
        with self._lock:
            self._db.execute(sql, params)

    def _read(self, sql: str, params: Sequence[Any]) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    # Calls

    def call_start(self, req: CallStartParams) -> CallStartResponse:
        """Insert a call, or complete the row its (earlier) end created."""
        start = req["start"]
        call_id = start.get("id") or generate_id()
        trace_id = start.get("trace_id") or call_id
        self._write(
            "INSERT INTO calls (project_id, id, trace_id, parent_id, thread_id, turn_id, op_name,"
            " op_short, display_name, started_at, attributes, inputs, wb_user_id, wb_run_id,"
            " wb_run_step) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (project_id, id) DO UPDATE SET trace_id = excluded.trace_id,"
            " parent_id = excluded.parent_id, thread_id = excluded.thread_id,"
            " turn_id = excluded.turn_id, op_name = excluded.op_name,"
            " op_short = excluded.op_short, display_name = excluded.display_name,"
            " started_at = excluded.started_at, attributes = excluded.attributes,"
            " inputs = excluded.inputs, wb_user_id = excluded.wb_user_id,"
            " wb_run_id = excluded.wb_run_id, wb_run_step = excluded.wb_run_step",
            (
                start["project_id"],
                call_id,
                trace_id,
                start.get("parent_id"),
                start.get("thread_id"),
                start.get("turn_id"),
                start["op_name"],
                _op_short(start["op_name"]),
                start.get("display_name"),
                _micros(start["started_at"]),
                json.dumps(start["attributes"]),
                json.dumps(start["inputs"]),
                start.get("wb_user_id"),
                start.get("wb_run_id"),
                start.get("wb_run_step"),
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
                _micros(end.get("started_at")),
                _micros(end["ended_at"]),
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
            where, params = _calls_where(project_id, filter)
            [(count,)] = self._read(f"SELECT COUNT(*) FROM calls WHERE {where}", params)
            count = count if limit is None else min(count, limit)
        return CallQueryStatsResponse(count=count)

    def _select_calls(
        self,
        project_id: str,
        filter: Mapping[str, Any],
        *,
        query: Mapping[str, Any] | None = None,
        sort_by: Sequence[Mapping[str, str]] | None = None,
        limit: int | None = None,
        offset: int | None = None,
        include_feedback: bool = False,
    ) -> list[Call]:
        where, params = _calls_where(project_id, filter)
        order = []
        for sort in sort_by or [{"field": "started_at", "direction": "asc"}]:
            if sort["field"] not in _SORTABLE:
                raise ValueError(
                    f"cannot sort calls by {sort['field']!r}: not in {sorted(_SORTABLE)}"
                )
            direction = "DESC" if sort["direction"] == "desc" else "ASC"
            order.append(f"{sort['field']} {direction}")
        sql = f"SELECT * FROM calls WHERE {where} ORDER BY {', '.join(order)}, id"
        # Without a query expression, SQLite pages; with one, Python filters then pages.
        if query is None and (limit is not None or offset):
            sql += " LIMIT ? OFFSET ?"
            params += [-1 if limit is None else limit, offset or 0]
        rows = self._read(sql, params)
        feedback = self._feedback_by_call(project_id, rows) if include_feedback else {}
        calls = [_call_from_row(row, feedback.get(row["id"])) for row in rows]
        if query is not None:
            calls = [c for c in calls if _evaluate(query["$expr"], c.model_dump())]
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
        for ref, row in rows:
            by_call.setdefault(ref.removeprefix(prefix), []).append(json.loads(row))
        return by_call

    # Objects, files and tables

    def obj_create(self, req: ObjectCreateParams) -> ObjectCreateResponse:
        """Store a version of an object under its content digest (idempotent)."""
        obj = req["obj"]
        project_id, object_id = obj["project_id"], obj["object_id"]
        result = compute_object_digest_result(obj["val"], obj.get("builtin_object_class"))
        val = result.processed_val
        is_op = isinstance(val, dict) and val.get("weave_type", {}).get("type") == "Op"
        with self._lock:
            self._db.execute(
                "INSERT OR IGNORE INTO objects (project_id, object_id, digest, version_index,"
                " kind, base_object_class, leaf_object_class, val, created_at)"
                " SELECT ?, ?, ?, COUNT(*), ?, ?, ?, ?, ? FROM objects"
                " WHERE project_id = ? AND object_id = ?",
                (
                    project_id,
                    object_id,
                    result.digest,
                    "op" if is_op else "object",
                    result.base_object_class,
                    result.leaf_object_class,
                    result.json_val,
                    _micros(datetime.datetime.now(datetime.UTC)),
                    project_id,
                    object_id,
                ),
            )
        return ObjectCreateResponse(digest=result.digest, object_id=object_id)

    def obj_read(self, req: ObjectReadParams) -> ObjectReadResponse:
        """One object version by digest, `latest` or `v<index>`."""
        project_id, object_id, digest = req["project_id"], req["object_id"], req["digest"]
        params: list[Any] = [project_id, object_id, project_id, object_id]
        if digest == "latest":
            version = "ORDER BY version_index DESC LIMIT 1"
        elif digest.startswith("v") and digest[1:].isdigit():
            version = "AND version_index = ?"
            params.append(int(digest[1:]))
        else:
            version = "AND digest = ?"
            params.append(digest)
        rows = self._read(
            "SELECT *, version_index = (SELECT MAX(version_index) FROM objects"
            " WHERE project_id = ? AND object_id = ?) AS is_latest FROM objects"
            f" WHERE project_id = ? AND object_id = ? {version}",
            params,
        )
        if not rows:
            raise NotFoundError(f"object {object_id}:{digest} not found")
        obj = dict(rows[0])
        obj["val"] = json.loads(obj["val"])
        obj["created_at"] = _datetime(obj["created_at"])
        return ObjectReadResponse(obj=Obj(**obj))

    def file_create(self, req: FileCreateParams) -> FileCreateResponse:
        """Store file content under its digest (idempotent)."""
        content = _file_bytes(req["file"])
        digest = compute_file_digest(content)
        self._write(
            "INSERT OR IGNORE INTO files (project_id, digest, content) VALUES (?, ?, ?)",
            (req["project_id"], digest, content),
        )
        return FileCreateResponse(digest=digest)

    def file_content_read(self, req: FileContentParams) -> FileContentReadRes:
        rows = self._read(
            "SELECT content FROM files WHERE project_id = ? AND digest = ?",
            (req["project_id"], req["digest"]),
        )
        if not rows:
            raise NotFoundError(f"file {req['digest']} not found")
        return FileContentReadRes(content=rows[0][0])

    def table_create(self, req: TableCreateParams) -> TableCreateResponse:
        """Store a table's rows under their digests and the table under its row list's digest."""
        table = req["table"]
        project_id = table["project_id"]
        rows = list(table["rows"])
        row_digests = [compute_row_digest(row) for row in rows]
        digest = compute_table_digest(row_digests)
        with self._lock:
            self._db.executemany(
                "INSERT OR IGNORE INTO table_rows (project_id, digest, val) VALUES (?, ?, ?)",
                [
                    (project_id, d, json.dumps(row))
                    for d, row in zip(row_digests, rows, strict=True)
                ],
            )
            self._db.execute(
                "INSERT OR IGNORE INTO tables (project_id, digest, row_digests) VALUES (?, ?, ?)",
                (project_id, digest, json.dumps(row_digests)),
            )
        return TableCreateResponse(digest=digest, row_digests=row_digests)

    def table_query(self, req: TableQueryParams) -> TableQueryResponse:
        """A table's rows in insertion order, by `row_digests`, `limit` and `offset`;
        `sort_by` raises `ValueError`."""
        if req.get("sort_by"):
            raise ValueError("table_query does not support sort_by")
        project_id = req["project_id"]
        digests = self._table_row_digests(project_id, req["digest"])
        indexed = list(enumerate(digests))
        if (wanted := (req.get("filter") or {}).get("row_digests")) is not None:
            indexed = [(i, d) for i, d in indexed if d in set(wanted)]
        start = req.get("offset") or 0
        limit = req.get("limit")
        indexed = indexed[start : None if limit is None else start + limit]
        vals = self._row_vals(project_id, [d for _, d in indexed])
        return TableQueryResponse(
            rows=[Row(digest=d, val=vals[d], original_index=i) for i, d in indexed]
        )

    def _table_row_digests(self, project_id: str, digest: str) -> list[str]:
        rows = self._read(
            "SELECT row_digests FROM tables WHERE project_id = ? AND digest = ?",
            (project_id, digest),
        )
        if not rows:
            raise NotFoundError(f"table {digest} not found")
        return json.loads(rows[0][0])

    def _row_vals(self, project_id: str, digests: list[str]) -> dict[str, Any]:
        rows = self._read(
            f"SELECT digest, val FROM table_rows WHERE project_id = ?"
            f" AND digest IN ({', '.join('?' * len(digests))})",
            [project_id, *digests],
        )
        return {digest: json.loads(val) for digest, val in rows}

    def refs_read_batch(self, req: RefReadBatchParams) -> RefReadBatchResponse:
        """The values that object, op and table refs (with `key/attr/index/id` paths) point to."""
        return RefReadBatchResponse(vals=[self._resolve(uri) for uri in req["refs"]])

    def _resolve(self, uri: str) -> Any:
        ref = Ref.parse_uri(uri)
        project_id = f"{ref.entity}/{ref.project}"
        if isinstance(ref, TableRef):
            digests = self._table_row_digests(project_id, ref.digest)
            vals = self._row_vals(project_id, digests)
            return [vals[d] for d in digests]
        if not isinstance(ref, ObjectRef):
            raise ValueError(f"cannot resolve {uri}: only object, op and table refs")
        val = self.obj_read(
            {"project_id": project_id, "object_id": ref.name, "digest": ref.digest}
        ).obj.val
        extra = list(ref.extra)
        for edge, key in zip(extra[::2], extra[1::2], strict=True):
            if edge == "id":  # a row of the table `val` refers to
                val = self._row_vals(project_id, [key])[key]
                continue
            if isinstance(val, str) and val.startswith("weave:///"):
                val = self._resolve(val)
            val = val[int(key)] if edge == "index" else val[key]
        return val

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
                _micros(created_at),
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
            json.loads(row)
            for (row,) in self._read(
                "SELECT row FROM feedback WHERE project_id = ? ORDER BY created_at",
                (req["project_id"],),
            )
        ]
        if (query := req.get("query")) is not None:
            rows = [row for row in rows if _evaluate(query["$expr"], row)]
        for sort in reversed(list(req.get("sort_by") or [])):
            rows.sort(
                key=lambda row, field=sort["field"]: _sort_key(_get_path(row, field)),
                reverse=sort["direction"] == "desc",
            )
        total = len(rows)
        start = req.get("offset") or 0
        limit = req.get("limit")
        rows = rows[start : None if limit is None else start + limit]
        if fields := req.get("fields"):
            rows = [{f: row.get(f) for f in fields} for row in rows]
        return FeedbackQueryResponse(result=rows, total_count=total)


def _micros(value: str | datetime.datetime | None) -> int | None:
    """A timestamp as integer microseconds since the epoch: exact, and sorts in SQL."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    return (value - _EPOCH) // datetime.timedelta(microseconds=1)


def _datetime(micros: int) -> datetime.datetime:
    return _EPOCH + datetime.timedelta(microseconds=micros)


def _op_short(op_name: str) -> str:
    """The op's name from its ref `weave:///entity/project/op/<name>:<digest>`."""
    return op_name.rsplit("/", 1)[-1].rsplit(":", 1)[0]


def _calls_where(project_id: str, filter: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """SQL conditions for a calls filter; listed calls must have started."""
    clauses = ["project_id = ?", "op_name IS NOT NULL"]
    params: list[Any] = [project_id]
    for key in ("input_refs", "output_refs"):
        if filter.get(key):
            raise ValueError(f"the local trace store does not filter calls by {key}")
    if (op_names := filter.get("op_names")) is not None:
        exact = [n for n in op_names if n.startswith("weave:") and not n.endswith(":*")]
        short = [_op_short(n.removesuffix(":*")) for n in op_names if n not in exact]
        clauses.append(
            f"(op_name IN ({', '.join('?' * len(exact))})"
            f" OR op_short IN ({', '.join('?' * len(short))}))"
        )
        params += exact + short
    for key, column in _FILTER_COLUMNS.items():
        if (values := filter.get(key)) is not None:
            clauses.append(f"{column} IN ({', '.join('?' * len(values))})")
            params += values
    if filter.get("trace_roots_only"):
        clauses.append("parent_id IS NULL")
    return " AND ".join(clauses), params


def _call_from_row(row: sqlite3.Row, feedback: list[dict[str, Any]] | None) -> Call:
    """A stored call as the server returns it, with `summary.weave` computed."""
    call = dict(row)
    op_short = call.pop("op_short")
    started_at, ended_at = call["started_at"], call["ended_at"]
    summary = json.loads(call["summary"]) if call["summary"] else {}
    if call["exception"] is not None:
        status = "error"
    elif ended_at is None:
        status = "running"
    elif summary.get("status_counts", {}).get("error"):
        status = "descendant_error"
    else:
        status = "success"
    summary["weave"] = {
        "status": status,
        "trace_name": call["display_name"] or op_short,
        "latency_ms": None if ended_at is None else (ended_at - started_at) // 1000,
    }
    if feedback is not None:
        summary["weave"]["feedback"] = feedback
    call["summary"] = summary
    for key in ("attributes", "inputs", "output"):
        call[key] = None if call[key] is None else json.loads(call[key])
    call["started_at"] = _datetime(started_at)
    call["ended_at"] = None if ended_at is None else _datetime(ended_at)
    return Call(**call)


def _file_bytes(file: Any) -> bytes:
    """The content of a stainless `FileTypes` value: bytes, a stream, a path, or a tuple
    `(name, content, ...)`."""
    if isinstance(file, tuple):
        file = file[1]
    if isinstance(file, bytes):
        return file
    if isinstance(file, PathLike):
        return Path(file).read_bytes()
    return file.read()


def _get_path(row: Mapping[str, Any], path: str) -> Any:
    """A dotted path into nested dicts (and list indices); None where it leads nowhere."""
    val: Any = row
    for part in path.split("."):
        if isinstance(val, Mapping):
            val = val.get(part)
        elif isinstance(val, list) and part.isdigit() and int(part) < len(val):
            val = val[int(part)]
        else:
            return None
    return val


def _sort_key(value: Any) -> tuple[bool, Any]:
    """Missing values sort first, like SQL NULLs ascending."""
    return (value is not None, value)


def _evaluate(expr: Mapping[str, Any], row: Mapping[str, Any]) -> Any:
    """A weave query expression (`{"$eq": [{"$getField": "x"}, {"$literal": 1}]}`) on a row."""
    (op, arg), *_ = expr.items()
    match op:
        case "$literal":
            return arg
        case "$getField":
            return _get_path(row, arg)
        case "$convert":
            return _convert(_evaluate(arg["input"], row), arg["to"])
        case "$and":
            return all(_evaluate(e, row) for e in arg)
        case "$or":
            return any(_evaluate(e, row) for e in arg)
        case "$not":
            return not _evaluate(arg[0], row)
        case "$eq":
            return _evaluate(arg[0], row) == _evaluate(arg[1], row)
        case "$in":
            return _evaluate(arg[0], row) in [_evaluate(e, row) for e in arg[1]]
        case "$contains":
            text = _evaluate(arg["input"], row)
            sub = _evaluate(arg["substr"], row)
            if not isinstance(text, str) or not isinstance(sub, str):
                return False
            if arg.get("case_insensitive"):
                return sub.lower() in text.lower()
            return sub in text
        case "$gt" | "$gte" | "$lt" | "$lte":
            left, right = _evaluate(arg[0], row), _evaluate(arg[1], row)
            if left is None or right is None:
                return False
            if isinstance(left, datetime.datetime) and isinstance(right, int | float):
                left = left.timestamp()  # weave compares times with epoch seconds
            return _COMPARISONS[op](left, right)
    raise ValueError(f"unsupported query operator {op!r}")


def _convert(value: Any, to: str) -> Any:
    if to == "exists":
        return value is not None
    if value is None:
        return None
    match to:
        case "double":
            return float(value)
        case "int":
            return int(value)
        case "string":
            return value if isinstance(value, str) else json.dumps(value)
        case "bool":
            return bool(value)
    raise ValueError(f"unsupported $convert target {to!r}")

"""Objects, files and tables of the local trace store, and the refs that point into them.

weave saves what a call references (a `weave.Dataset`, an op's code) as content-addressed
objects, files and table rows; reading a trace back resolves the refs against them.
"""

from __future__ import annotations

import datetime
import json
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
from weave.vendor.weave_server_sdk.types import (
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
from weave.vendor.weave_server_sdk.types.object_read_response import Obj
from weave.vendor.weave_server_sdk.types.table_query_response import Row

from harness.tracing.local_db import LocalTraceDb, from_micros, micros


class LocalObjectServer(LocalTraceDb):
    """The object, file, table and ref methods of the trace-server interface."""

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
                    micros(datetime.datetime.now(datetime.UTC)),
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
        obj["created_at"] = from_micros(obj["created_at"])
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
        return FileContentReadRes(content=rows[0]["content"])

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
        return json.loads(rows[0]["row_digests"])

    def _row_vals(self, project_id: str, digests: list[str]) -> dict[str, Any]:
        rows = self._read(
            f"SELECT digest, val FROM table_rows WHERE project_id = ?"
            f" AND digest IN ({', '.join('?' * len(digests))})",
            [project_id, *digests],
        )
        return {row["digest"]: json.loads(row["val"]) for row in rows}

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
        val: Any = self.obj_read(  # JSON data of any shape
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

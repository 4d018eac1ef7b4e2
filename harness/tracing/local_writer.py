"""The harness's own spans written straight into the local trace store, without the weave client.

Recording a run through `WeaveClient` costs about a second to import weave, most of a second for
its first call, and per span a serialization pass and two trace-server requests from a thread
pool. The harness's spans hold plain data only, so this tracer writes the rows weave 0.54 would
have written (same ids, op refs, attributes, summaries and exceptions) and the weave client reads
them back as its own (`open_local_client`). Rows are written in batches by one background
thread: a span that starts and ends between two batches is one insert. A span still open when
its batch is written is stored open, so that a killed run leaves interrupted calls as before.
"""

from __future__ import annotations

import json
import os
import platform
import random
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.tracing.clients import LOCAL_ENTITY, LOCAL_PROJECT
from harness.tracing.local_db import LocalTraceDb, now_micros, op_short
from harness.tracing.spans import Tracer

if TYPE_CHECKING:
    from weave.trace.weave_client import WeaveClient

PROJECT_ID = f"{LOCAL_ENTITY}/{LOCAL_PROJECT}"
# The digest weave 0.54 gives an op named by a string (`client.create_call("name", ...)`): the
# same for every such op, so the local store lists them as weave recorded them.
STRING_OP_DIGEST = "6jAV4T6F42RKlabeB2RO0BXkbFFPrKyU2yyQedpotB8"
# The op object and its code file weave saves for such an op, so that `weave.ref(op_name)` reads.
OP_VALUE = json.dumps(
    {
        "_type": "CustomWeaveType",
        "files": {"obj.py": "ETrc8kd4cPrqSoL568qx5Zfgg5JK00kstefm3C74dHE"},
        "weave_type": {"type": "Op"},
    }
)
OP_FILE = (
    "ETrc8kd4cPrqSoL568qx5Zfgg5JK00kstefm3C74dHE",
    b"import weave\n\n@weave.op\ndef op_fn(*args, **kwargs):  # type: ignore\n"
    b"    # Code-capture unavailable for this op\n    pass\n",
)
BATCH_SECONDS = 0.2
MAX_PENDING = 2000  # rows waiting for the writer before a span waits for it

_INSERT = (
    "INSERT INTO calls (project_id, id, trace_id, parent_id, op_name, op_short, display_name,"
    " started_at, ended_at, attributes, inputs, output, summary, exception, writer) VALUES ",
    "",
)
_ENDED_AT, _OUTPUT, _SUMMARY, _EXCEPTION = 8, 11, 12, 13  # their places in an _INSERT row
# The end of a span whose row is written already (an upsert: one statement for many rows).
_END = (
    "INSERT INTO calls (ended_at, output, summary, exception, project_id, id) VALUES ",
    " ON CONFLICT (project_id, id) DO UPDATE SET ended_at = excluded.ended_at,"
    " output = excluded.output, summary = excluded.summary, exception = excluded.exception",
)
# SQLite's module lets other threads run while each statement executes, so a row per statement
# handed the interpreter back and forth between the writer and the run at every row, which cost
# more CPU than writing the rows: rows go many to a statement, within the 999 variables of
# older SQLite builds.
MAX_VARIABLES = 999
_SUMMARY_TEXT = '{{"status_counts": {{"success": {success}, "error": {error}}}}}'  # as json.dumps


@dataclass(eq=False)
class LocalSpan:
    """A started span: what `child_span` and the nodes read of it (`id`, `trace_id`, `output`)."""

    id: str
    trace_id: str
    parent: LocalSpan | None = None
    output: Any = None
    counts: dict[str, int] = field(default_factory=lambda: {"success": 0, "error": 0})


class LocalTracer(Tracer):
    """A `Tracer` on the local trace store that needs no weave import."""

    def __init__(self, store: Path) -> None:
        self._reader: WeaveClient | None = None
        super().__init__(None)
        self.enabled = True
        store.parent.mkdir(parents=True, exist_ok=True)
        self.store = store
        self.db = LocalTraceDb(store)
        self._weave = _weave_attributes()
        self._ops: set[str] = set()  # op objects saved
        self._attribute_texts: dict[tuple[Any, ...], str] = {}
        self._lock = threading.Condition()
        self._pending: dict[str, list[Any]] = {}  # id -> row, not yet inserted
        self._ends: list[tuple[Any, ...]] = []  # ends of spans already inserted
        self._stop = False
        self._failure: Exception | None = None  # why the store could not be written
        self._write_lock = threading.Lock()  # batches are written in the order they were taken
        self._writer = threading.Thread(target=self._write_loop, name="trace-writer", daemon=True)
        self._writer.start()

    @property
    def client(self) -> WeaveClient | None:
        """A weave client on the store, to read back what was recorded (opened on first use,
        after what is pending is written)."""
        if self._reader is None and self.enabled:
            from harness.tracing.clients import open_local_client

            self.flush()
            self._reader = open_local_client(self.store)
        return self._reader

    @client.setter
    def client(self, value: WeaveClient | None) -> None:
        """`Tracer.__init__` sets the client it writes through; this tracer writes without one."""

    def start(
        self,
        op: str,
        inputs: dict[str, Any],
        attributes: dict[str, Any] | None = None,
        parent: Any = None,
        display_name: str | None = None,
    ) -> LocalSpan | None:
        if not self.enabled or self._failure is not None:
            return None
        span_id = new_id()
        span = LocalSpan(span_id, parent.trace_id if parent else new_id(), parent)
        row = [
            PROJECT_ID,
            span_id,
            span.trace_id,
            parent.id if parent else None,
            f"weave:///{PROJECT_ID}/op/{op}:{STRING_OP_DIGEST}",
            op_short(op),
            display_name,
            now_micros(),
            None,
            self._attributes_json(attributes or {}),
            json.dumps(self._plain(inputs)),
            None,
            None,
            None,
            self.db.writer,
        ]
        if op not in self._ops:
            self._ops.add(op)
            self.db._save_op(PROJECT_ID, op, STRING_OP_DIGEST, OP_VALUE, OP_FILE)
        with self._lock:
            self._pending[span_id] = row
            self._backpressure()
        return span

    def _attributes_json(self, attributes: dict[str, Any]) -> str:
        """The attributes column; the spans of an episode share theirs, written once."""
        try:
            key = tuple(attributes.items())
            cached = self._attribute_texts.get(key)
        except TypeError:  # a value that is no hashable scalar
            return json.dumps({"weave": self._weave, **self._plain(attributes)})
        if cached is None:
            cached = json.dumps({"weave": self._weave, **self._plain(attributes)})
            if len(self._attribute_texts) < 10_000:
                self._attribute_texts[key] = cached
        return cached

    def end(self, span: Any, output: Any = None, exception: BaseException | None = None) -> None:
        if not self.enabled or span is None or self._failure is not None:
            return
        span.counts["error" if exception else "success"] += 1
        if isinstance(span.parent, LocalSpan):  # weave sums a call's children into its summary
            for status, count in span.counts.items():
                span.parent.counts[status] += count
        values = (
            now_micros(),
            json.dumps(self._plain(output)),
            _SUMMARY_TEXT.format(**span.counts),
            self._redact(_exception_json(exception)) if exception else None,
        )
        with self._lock:
            row = self._pending.get(span.id)
            if row is not None:
                row[_ENDED_AT], row[_OUTPUT], row[_SUMMARY], row[_EXCEPTION] = values
            else:
                self._ends.append((*values, PROJECT_ID, span.id))
            self._backpressure()
        span.output = None

    def reference(self, trace_id: str | None, call_id: str | None) -> LocalSpan | None:
        if not self.enabled or trace_id is None or call_id is None:
            return None
        return LocalSpan(call_id, trace_id)

    def flush(self) -> None:
        self._write_batch()

    def close(self) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._stop = True
            self._lock.notify()
        self._writer.join()
        if self._failure is None:
            try:
                self.flush()
            except Exception as exc:  # said below, once the store is closed
                self._failure = exc
        if self._reader is not None:
            Tracer(self._reader).close()
            self._reader = None
        try:
            self.db.close()  # closes the calls left open
        except Exception as exc:
            self._failure = self._failure or exc
        self.enabled = False
        if self._failure is not None:
            raise RuntimeError(
                f"traces could not be written to {self.store}: {self._failure}"
            ) from self._failure

    def _backpressure(self) -> None:
        """Called holding the lock: wake the writer, and wait for it when far behind (a long
        run's memory stays flat)."""
        waiting = len(self._pending) + len(self._ends)
        if waiting >= MAX_PENDING:
            self._lock.notify()
            self._lock.wait_for(
                lambda: (
                    len(self._pending) + len(self._ends) < MAX_PENDING // 2
                    or self._failure is not None
                )
            )

    def _write_loop(self) -> None:
        while True:
            with self._lock:
                self._lock.wait(BATCH_SECONDS)
                stop = self._stop
            try:
                self._write_batch()
            except Exception as exc:  # an unwritable store: the run goes on, `close` says so
                with self._lock:
                    self._failure = exc
                    self._pending, self._ends = {}, []
                    self._lock.notify_all()
                return
            if stop:
                return

    def _write_batch(self) -> None:
        """Write what is pending (a span's end after its start, whichever thread writes)."""
        with self._write_lock:
            with self._lock:
                rows, ends = list(self._pending.values()), self._ends
                self._pending, self._ends = {}, []
                self._lock.notify_all()
            if rows or ends:
                self.db._write_batch([*_statements(_INSERT, rows), *_statements(_END, ends)])


def _statements(
    statement: tuple[str, str], rows: Sequence[Sequence[Any]]
) -> list[tuple[str, list[Any]]]:
    """Multi-row statements (`statement` is the text before and after the rows' VALUES) with
    their values."""
    if not rows:
        return []
    row = "(" + ", ".join(["?"] * len(rows[0])) + ")"
    size = MAX_VARIABLES // len(rows[0])
    found = []
    for start in range(0, len(rows), size):
        chunk = rows[start : start + size]
        text = statement[0] + ", ".join([row] * len(chunk)) + statement[1]
        found.append((text, [value for values in chunk for value in values]))
    return found


def new_id() -> str:
    """A UUIDv7 string, as weave gives calls and traces (time-ordered)."""
    millis = time.time_ns() // 1_000_000
    value = (millis << 80) | _ID_BITS.getrandbits(80)
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


# An id's random bits: a generator of its own, seeded from the OS and again in a forked child,
# so that no `random.seed` of a user's code makes ids repeat; `os.urandom` per id was a system
# call per span, a tenth of a span's cost.
_ID_BITS = random.Random()
os.register_at_fork(after_in_child=_ID_BITS.seed)


def _weave_attributes() -> dict[str, str]:
    """The attributes weave 0.54 adds to every call."""
    return {
        "client_version": version("weave"),
        "source": "python-sdk",
        "sys_version": sys.version,
        "os_name": platform.system(),
        "os_version": platform.version(),
        "os_release": platform.release(),
    }


def _exception_json(exception: BaseException) -> str:
    """An exception as weave records it: type, message and the stack."""
    result: dict[str, Any] = {"type": type(exception).__name__, "message": str(exception)}
    if exception.__traceback__:
        stack = traceback.extract_stack(exception.__traceback__.tb_frame)[:-1]
        stack.extend(traceback.extract_tb(exception.__traceback__))
        result["traceback"] = [
            {
                "filename": frame.filename,
                "line_number": frame.lineno,
                "function_name": frame.name,
                "text": frame.line,
            }
            for frame in stack
        ]
    return json.dumps(result)

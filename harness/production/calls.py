"""Weave calls as plain records, from any source: the Weave service, the local trace store, or
a JSONL export (one call per line in the trace server's call schema).

Every source is a stream: calls are read one by one and never held all at once. Whatever the
source, inputs and outputs are plain JSON data, read by `harness.tracing.plain`: weave's objects
(an Anthropic `Message` comes back as an `ObjectRecord`), its containers and boxed values, and
its encoding of them in a raw export, for whichever client weave patched.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from harness.tracing.plain import plain


class CallRecord(BaseModel):
    """One Weave call in the trace server's schema (`calls/stream_query`, `Call.to_dict()`)."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(description="Call id.")
    project_id: str = Field(default="", description="entity/project.")
    op_name: str = Field(description="Op name or op ref (weave:///e/p/op/NAME:DIGEST).")
    display_name: str | None = Field(default=None, description="Display name.")
    trace_id: str = Field(description="Trace the call belongs to.")
    parent_id: str | None = Field(default=None, description="Parent call, None for a root.")
    thread_id: str | None = Field(default=None, description="Session the trace belongs to.")
    turn_id: str | None = Field(default=None, description="Turn within the thread.")
    started_at: str = Field(default="", description="ISO-8601 start time.")
    ended_at: str | None = Field(default=None, description="ISO-8601 end time.")
    inputs: dict[str, Any] = Field(default_factory=dict, description="Inputs.")
    output: Any = Field(default=None, description="Output.")
    exception: str | None = Field(default=None, description="The exception, as JSON text.")
    attributes: dict[str, Any] = Field(default_factory=dict, description="Attributes.")
    summary: dict[str, Any] = Field(default_factory=dict, description="Summary (usage, status).")
    feedback: list[dict[str, Any]] = Field(default_factory=list, description="Feedback rows.")

    @property
    def op(self) -> str:
        """The op's short name: `weave:///e/p/op/handle_turn:abc` -> `handle_turn`."""
        return op_short_name(self.op_name)

    @property
    def kind(self) -> str | None:
        """The op kind (`@weave.op(kind=...)`): agent, tool, llm, ..."""
        weave = self.attributes.get("weave") or {}
        return weave.get("kind") if isinstance(weave, dict) else None

    @property
    def status(self) -> str:
        """success, error, running, interrupted, ... as the trace server reports it."""
        weave = self.summary.get("weave") if isinstance(self.summary, dict) else None
        status = weave.get("status") if isinstance(weave, dict) else None
        if status:
            return str(status)
        return "error" if self.exception else "success"

    @property
    def interrupted(self) -> bool:
        """The recording process ended before the call did (see `harness.tracing`); such a
        call also carries an `Interrupted` exception."""
        return self.exception is not None and self.status == INTERRUPTED

    def error(self) -> tuple[str, str] | None:
        """(type, message) of the exception the call raised, or of an `error` status."""
        if not self.exception:
            failed = self.status == "error"
            return ("Error", "the call ended with status error") if failed else None
        try:
            parsed = json.loads(self.exception)
        except ValueError:
            return "Exception", self.exception
        if isinstance(parsed, dict):
            return str(parsed.get("type", "Exception")), str(parsed.get("message", ""))
        return "Exception", str(parsed)


def from_weave(call: Any) -> CallRecord:
    """A record of a call read through the weave client (feedback included when asked for),
    every value as plain JSON data (`harness.tracing.plain`): an Anthropic `Message` reply is
    the dict of its fields, never the text `ObjectRecord({...})`."""
    data = plain(call.to_dict())
    summary = data.get("summary") or {}
    data["feedback"] = (summary.get("weave") or {}).get("feedback") or []
    data["id"] = call.id
    return CallRecord.model_validate(data)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
INTERRUPTED = "interrupted"
_AGE = re.compile(r"(\d+)\s*([mhdw])")
_AGE_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_AGE_MINUTES = {"m": 1, "h": 60, "d": 24 * 60, "w": 7 * 24 * 60}
MAX_AGE_DAYS = 36_525
"""Longest age a `--since`/`--until` bound may name: 100 years (36525d)."""


def parse_time(text: str | None) -> datetime | None:
    """An ISO-8601 time (UTC when it has no zone), or None."""
    if not text:
        return None
    try:
        value = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def parse_when(text: str, now: datetime | None = None) -> datetime:
    """A `--since`/`--until` bound: an ISO date or time (`2026-11-30`, `2026-11-30T10:00`), or
    an age before now (`30m`, `24h`, `7d`, `2w`) of at most `MAX_AGE_DAYS`; ValueError for
    anything else (an age is bounded before it is computed: no overflow)."""
    age = _AGE.fullmatch(text.strip())
    if age:
        digits, unit = age.group(1), age.group(2)
        if len(digits) > 12 or int(digits) * _AGE_MINUTES[unit] > MAX_AGE_DAYS * 24 * 60:
            raise ValueError(
                f"expected an age of at most 100 years ({MAX_AGE_DAYS}d), got {text.strip()}"
            )
        delta = timedelta(**{_AGE_UNITS[age.group(2)]: int(age.group(1))})
        return (now or datetime.now(UTC)) - delta
    value = parse_time(text.strip())
    if value is None:
        raise ValueError(
            "expected an ISO date or time (2026-11-30, 2026-11-30T10:00:00Z) or an age "
            "such as 30m, 24h, 7d or 2w"
        )
    return value


def op_matches(pattern: str, op_name: str) -> bool:
    """Whether an op is the one `pattern` names: a full ref (`weave:///e/p/op/name:digest`,
    or `...:*` for any version), a dotted name (`Backend.issue_refund`), or a bare name
    (`issue_refund`, also matching `Backend.issue_refund`)."""
    if pattern.startswith("weave:"):
        if pattern.endswith(":*"):
            return op_name.rsplit(":", 1)[0] == pattern[:-2]
        return op_name == pattern
    short = op_short_name(op_name)
    return short == pattern or short.endswith("." + pattern)


def op_short_name(op_name: str) -> str:
    """`weave:///e/p/op/Backend.issue_refund:abc` -> `Backend.issue_refund`."""
    return op_name.split("/op/", 1)[-1].split(":", 1)[0]


@dataclass
class Filters:
    """Which calls to read (`thread_ids`) and which conversations to convert (the rest)."""

    thread_ids: list[str] = field(default_factory=list)
    trace_ids: list[str] = field(default_factory=list)  # a session without a thread: its trace
    since: datetime | None = None  # a conversation that started at or after
    until: datetime | None = None  # ... and before
    ops: list[str] = field(default_factory=list)  # that has a call of one of these ops
    status: str = "any"  # error: an exception somewhere; success: no failure at all
    negative: bool = False  # only conversations with negative feedback

    def server_filter(self) -> dict[str, Any]:
        filter_: dict[str, Any] = {}
        if self.thread_ids:
            filter_["thread_ids"] = self.thread_ids
        if self.trace_ids:
            filter_["trace_ids"] = self.trace_ids
        return filter_

    def admits(self, record: CallRecord) -> bool:
        """Whether a call may belong to a wanted conversation (its thread, or its trace)."""
        return (not self.thread_ids or record.thread_id in self.thread_ids) and (
            not self.trace_ids or record.trace_id in self.trace_ids
        )

    def admits_time(self, started: datetime) -> bool:
        """Whether a conversation that started then is in the time range."""
        if self.since is not None and started < self.since:
            return False
        return self.until is None or started < self.until


def read_client(client: Any, filters: Filters) -> Iterator[CallRecord]:
    """Calls through a weave client (the W&B service or the local store), with feedback."""
    for call in client.get_calls(
        filter=filters.server_filter(),
        include_feedback=True,
        sort_by=[{"field": "started_at", "direction": "asc"}],
    ):
        record = from_weave(call)
        if filters.admits(record):
            yield record


@dataclass
class Unreadable:
    """A part of the input that could not be used, and why; or, `skipped` false, a part that
    was used after a repair the user should know of (invalid UTF-8 bytes replaced)."""

    where: str
    why: str
    skipped: bool = True

    @property
    def label(self) -> str:
        """How a command names it: `unreadable` (left out) or `warning` (used, repaired)."""
        return "unreadable" if self.skipped else "warning"

    def __str__(self) -> str:
        return f"{self.where}: {self.why}"

    def masked(self, redact: Callable[[str], str]) -> Unreadable:
        """The same problem with `redact` applied to what it says (it quotes production)."""
        return replace(self, where=redact(self.where), why=redact(self.why))


def skipped(problems: list[Unreadable]) -> int:
    """How many of `problems` left something out (warnings about repaired lines are not)."""
    return sum(problem.skipped for problem in problems)


MAX_LINE_BYTES = 16 * 1024 * 1024
"""Longest line of a JSONL export that is read (16 MiB): a longer one is skipped, named with
its size, without ever being held in memory whole (a call of a real session is kilobytes)."""
_CHUNK = 1024 * 1024  # what is read at a time of the rest of a line too long to keep
_BOM = b"\xef\xbb\xbf"


def jsonl_lines(path: Path, problems: list[Unreadable]) -> Iterator[tuple[int, str]]:
    """The lines of a JSONL file as text, numbered from 1, blank ones left out. A line longer
    than `MAX_LINE_BYTES` is skipped (an `Unreadable` naming file:line and its size), read in
    chunks that are dropped as they come; invalid UTF-8 is replaced with U+FFFD and counted (a
    warning per line), so one bad byte costs one character, not the file."""
    with path.open("rb") as lines:
        number = 0
        while line := lines.readline(MAX_LINE_BYTES + 1):
            number += 1
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                size = len(line)
                while not line.endswith(b"\n") and (line := lines.readline(_CHUNK)):
                    size += len(line)
                problems.append(
                    Unreadable(
                        f"{path}:{number}",
                        f"line of {size:,} bytes skipped: longer than the {MAX_LINE_BYTES:,} "
                        "bytes a call may take",
                    )
                )
                continue
            if number == 1 and line.startswith(_BOM):
                line = line[len(_BOM) :]
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError:
                escaped = line.decode("utf-8", "surrogateescape")
                bad = sum(0xDC80 <= ord(char) <= 0xDCFF for char in escaped)
                text = line.decode("utf-8", "replace")
                problems.append(
                    Unreadable(
                        f"{path}:{number}",
                        f"{bad} invalid UTF-8 byte(s) replaced with U+FFFD",
                        skipped=False,
                    )
                )
            if text.strip():
                yield number, text


# A line written by another exporter than `write_jsonl` (the W&B API's `calls/stream_query`)
# keeps weave's encoding of objects (`_class_name`, `_bases`) and of arguments not given (the
# SDKs' sentinels as text). Substrings, not a regular expression: a search costs ~1 s per
# 100,000 lines, these ~0.05 s.
_ENCODED = ('"_class_name"', "NOT_GIVEN", " object at 0x")


def _encoded(line: str) -> bool:
    return any(mark in line for mark in _ENCODED)


def _decoded(record: CallRecord) -> CallRecord:
    """A record whose inputs and output were written in weave's encoding, as plain data."""
    record.inputs, record.output = plain(record.inputs), plain(record.output)
    return record


def read_jsonl(path: Path, filters: Filters, problems: list[Unreadable]) -> Iterator[CallRecord]:
    """Calls from a JSONL export; a malformed line is reported and skipped. Objects in weave's
    encoding (an export made with the W&B API) are read as plain data, as from the client;
    only the lines that hold such an encoding pay for it. Lines are read by `jsonl_lines`:
    one too long is skipped, invalid UTF-8 replaced (each named in `problems`)."""
    for number, line in jsonl_lines(path, problems):
        try:
            record = CallRecord.model_validate_json(line)
        except ValueError as exc:
            first = str(exc).splitlines()
            reason = first[0] if len(first) < 3 else f"{first[1]}: {first[2].strip()}"
            problems.append(Unreadable(f"{path}:{number}", f"not a call: {reason}"))
            continue
        if _encoded(line):
            record = _decoded(record)
        if filters.admits(record):
            yield record


def write_jsonl(records: Iterator[CallRecord], path: Path) -> int:
    """Write calls as JSONL (the format `read_jsonl` and the trace server use); the count."""
    count = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for record in records:
            out.write(record.model_dump_json() + "\n")
            count += 1
    return count

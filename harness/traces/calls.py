"""Weave calls as plain records, from any source: the Weave service, the local trace store, or
a JSONL export (one call per line in the trace server's call schema).

Every source is a stream: calls are read one by one and never held all at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


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
        name = self.op_name.split("/op/", 1)[-1]
        return name.split(":", 1)[0]

    @property
    def kind(self) -> str | None:
        """The op kind (`@weave.op(kind=...)`): agent, tool, llm, ..."""
        weave = self.attributes.get("weave") or {}
        return weave.get("kind") if isinstance(weave, dict) else None

    def error(self) -> tuple[str, str] | None:
        """(type, message) of the exception the call raised, if any."""
        if not self.exception:
            return None
        try:
            parsed = json.loads(self.exception)
        except ValueError:
            return "Exception", self.exception
        if isinstance(parsed, dict):
            return str(parsed.get("type", "Exception")), str(parsed.get("message", ""))
        return "Exception", str(parsed)


def _plain(value: Any) -> Any:
    """Weave's containers and datetimes as JSON data."""
    return json.loads(json.dumps(value, default=_default))


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list | tuple):
        return list(value)
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return str(value)


def from_weave(call: Any) -> CallRecord:
    """A record of a call read through the weave client (feedback included when asked for)."""
    data = _plain(call.to_dict())
    summary = data.get("summary") or {}
    data["feedback"] = (summary.get("weave") or {}).get("feedback") or []
    data["id"] = call.id
    return CallRecord.model_validate(data)


@dataclass
class Filters:
    """Which calls to read."""

    op_names: list[str] = field(default_factory=list)
    thread_ids: list[str] = field(default_factory=list)
    since: str | None = None  # ISO-8601, inclusive
    until: str | None = None  # ISO-8601, exclusive

    def server_filter(self) -> dict[str, Any]:
        filter_: dict[str, Any] = {}
        if self.thread_ids:
            filter_["thread_ids"] = self.thread_ids
        return filter_

    def admits(self, record: CallRecord) -> bool:
        """Time bounds (the rest apply to whole conversations)."""
        if self.since and record.started_at < self.since:
            return False
        return not (self.until and record.started_at >= self.until)


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
    """A part of the input that could not be used, and why."""

    where: str
    why: str

    def __str__(self) -> str:
        return f"{self.where}: {self.why}"


def read_jsonl(path: Path, filters: Filters, problems: list[Unreadable]) -> Iterator[CallRecord]:
    """Calls from a JSONL export; a malformed line is reported and skipped."""
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = CallRecord.model_validate_json(line)
            except ValueError as exc:
                first = str(exc).splitlines()
                reason = first[0] if len(first) < 3 else f"{first[1]}: {first[2].strip()}"
                problems.append(Unreadable(f"{path}:{number}", f"not a call: {reason}"))
                continue
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

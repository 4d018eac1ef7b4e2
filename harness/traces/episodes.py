"""The harness's own episode traces, read back through the weave client."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.defaults import TRACE_STORE
from harness.grading.result import Verdict
from harness.tracing import Tracer, open_local_client
from harness.transcript import Transcript

EPISODE_OP = "harness.episode"
GRADE_OP = "harness.grade"


@dataclass
class EpisodeTrace:
    """One recorded episode: its call, transcript and verdict (when it was graded)."""

    call_id: str
    trace_id: str
    started_at: str
    attributes: dict[str, Any]
    transcript: Transcript | None
    verdict: Verdict | None
    status: str = "success"  # as the trace server reports it: running, interrupted, ...


@dataclass
class RootCall:
    """The root call of a trace recorded by an app (not by the harness)."""

    call_id: str
    op: str
    thread_id: str | None
    started_at: str
    status: str  # success, error, running, interrupted, descendant_error
    feedback: int


def _status(call: Any) -> str:
    status = (call.summary or {}).get("weave", {}).get("status", "")
    return str(getattr(status, "value", status))  # weave gives known ones as a `TraceStatus`


def _plain(value: Any) -> Any:
    """Weave's containers as plain dicts and lists."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def trace_view(transcript: Transcript) -> dict[str, Any]:
    """An episode call's output: the Transcript, with its final state as one JSON text (a
    state has hundreds of values, and weave pays for each one it records)."""
    view = transcript.model_dump(mode="json", exclude_defaults=True)
    view["final_state"] = json.dumps(transcript.final_state, sort_keys=True)
    return view


def from_trace(output: Any) -> Transcript | None:
    """The Transcript an episode call recorded (see `trace_view`)."""
    output = _plain(output)
    if not isinstance(output, dict):
        return None
    if isinstance(output.get("final_state"), str):
        output["final_state"] = json.loads(output["final_state"])
    return Transcript.model_validate(output)


def _episode(call: Any, verdicts: dict[str, Verdict]) -> EpisodeTrace:
    transcript = from_trace(call.output)
    return EpisodeTrace(
        call_id=call.id,
        trace_id=call.trace_id,
        started_at=str(call.started_at),
        attributes=_plain(dict(call.attributes or {})),
        transcript=transcript,
        verdict=verdicts.get(call.id),
        status=_status(call),
    )


def list_roots(store: Path = TRACE_STORE, limit: int = 50) -> list[RootCall]:
    """The most recent root calls that the harness did not record (an app's, recorded with
    `record_locally`), newest first, with their feedback."""
    tracer = Tracer(open_local_client(store))
    try:
        not_harness = {
            "$not": [
                {
                    "$contains": {
                        "input": {"$getField": "op_name"},
                        "substr": {"$literal": "/op/harness."},
                    }
                }
            ]
        }
        calls = tracer.client.get_calls(
            filter={"trace_roots_only": True},
            query={"$expr": not_harness},
            limit=limit,
            sort_by=[{"field": "started_at", "direction": "desc"}],
            include_feedback=True,
        )
        return [
            RootCall(
                call_id=call.id,
                op=call.func_name,
                thread_id=call.thread_id,
                started_at=str(call.started_at),
                status=_status(call),
                feedback=len((call.summary or {}).get("weave", {}).get("feedback") or []),
            )
            for call in calls
        ]
    finally:
        tracer.close()


def _op_filter(op: str) -> dict[str, Any]:
    return {"op_names": [op]}


def list_episodes(store: Path = TRACE_STORE, limit: int = 50) -> list[EpisodeTrace]:
    """The most recent episodes of the local store, newest first."""
    tracer = Tracer(open_local_client(store))
    client = tracer.client
    try:
        calls = list(
            client.get_calls(
                filter=_op_filter(EPISODE_OP),
                limit=limit,
                sort_by=[{"field": "started_at", "direction": "desc"}],
            )
        )
        grades = client.get_calls(
            filter={**_op_filter(GRADE_OP), "parent_ids": [c.id for c in calls]}
        )
        verdicts = {
            g.parent_id: Verdict.model_validate(_plain(g.output))
            for g in grades
            if isinstance(g.output, dict)
        }
        return [_episode(call, verdicts) for call in calls]
    finally:
        tracer.close()


def find_episode(store: Path, call_id: str) -> EpisodeTrace | None:
    """The episode whose call id is, or ends with, `call_id` (as `traces list` shows it)."""
    tracer = Tracer(open_local_client(store))
    client = tracer.client
    try:
        calls = [
            c for c in client.get_calls(filter=_op_filter(EPISODE_OP)) if c.id.endswith(call_id)
        ]
        if len(calls) != 1:
            return None
        grades = client.get_calls(filter={**_op_filter(GRADE_OP), "parent_ids": [calls[0].id]})
        verdicts = {g.parent_id: Verdict.model_validate(_plain(g.output)) for g in grades}
        return _episode(calls[0], verdicts)
    finally:
        tracer.close()

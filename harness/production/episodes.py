"""The harness's own episode traces: what an episode call records (`trace_view`), and read back
through the weave client (`from_trace`, `list_episodes`). (The sessions apps recorded:
`app_sessions`.)"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.defaults import TRACE_STORE
from harness.grading.result import Verdict
from harness.state_diff import apply_changes, changes_between, state_digest
from harness.tracing import Tracer, open_local_client
from harness.tracing.plain import plain
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


def _status(call: Any) -> str:
    status = (call.summary or {}).get("weave", {}).get("status", "")
    return str(getattr(status, "value", status))  # weave gives known ones as a `TraceStatus`


def trace_view(transcript: Transcript, start: dict[str, Any] | None = None) -> dict[str, Any]:
    """An episode call's output: the Transcript, with its final state as one JSON text (a
    state has hundreds of values, and weave pays for each one it records); given the state it
    started from, only what changed (`state_changes`) and the start state's digest
    (`start_state`, as the results store keeps it): a trace costs what the episode changed, not
    the size of the database it ran on."""
    view = transcript.model_dump(mode="json", exclude_defaults=True, exclude={"final_state"})
    if start is None:
        view["final_state"] = json.dumps(transcript.final_state, sort_keys=True)
    else:
        changes = changes_between(start, transcript.final_state)
        view["start_state"] = state_digest(start)
        view["state_changes"] = json.dumps(changes, sort_keys=True, default=str)
    return view


def from_trace(
    output: Any, start_state: Callable[[str], dict[str, Any]] | None = None
) -> Transcript | None:
    """The Transcript an episode call recorded (see `trace_view`). A final state recorded as
    changes is rebuilt from the start state `start_state` gives for its digest (a results
    store's `state`); without it, the final state is left empty."""
    output = plain(output)
    if not isinstance(output, dict):
        return None
    if isinstance(output.get("final_state"), str):
        output["final_state"] = json.loads(output["final_state"])
    digest, changes = output.pop("start_state", None), output.pop("state_changes", None)
    if start_state is not None and digest is not None and changes is not None:
        output["final_state"] = apply_changes(start_state(digest), json.loads(changes))
    return Transcript.model_validate(output)


def _episode(call: Any, verdicts: dict[str, Verdict]) -> EpisodeTrace:
    transcript = from_trace(call.output)
    return EpisodeTrace(
        call_id=call.id,
        trace_id=call.trace_id,
        started_at=str(call.started_at),
        attributes=plain(dict(call.attributes or {})),
        transcript=transcript,
        verdict=verdicts.get(call.id),
        status=_status(call),
    )


def _op_filter(op: str) -> dict[str, Any]:
    return {"op_names": [op]}


def list_episodes(store: Path = TRACE_STORE, limit: int = 50) -> list[EpisodeTrace]:
    """The most recent episodes of the local store, newest first."""
    client = open_local_client(store)
    tracer = Tracer(client)
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
            g.parent_id: Verdict.model_validate(plain(g.output))
            for g in grades
            if isinstance(g.output, dict)
        }
        return [_episode(call, verdicts) for call in calls]
    finally:
        tracer.close()


def find_episode(store: Path, call_id: str) -> EpisodeTrace | None:
    """The episode whose call id is, or ends with, `call_id` (as `traces list` shows it)."""
    client = open_local_client(store)
    tracer = Tracer(client)
    try:
        calls = [
            c for c in client.get_calls(filter=_op_filter(EPISODE_OP)) if c.id.endswith(call_id)
        ]
        if len(calls) != 1:
            return None
        grades = client.get_calls(filter={**_op_filter(GRADE_OP), "parent_ids": [calls[0].id]})
        verdicts = {g.parent_id: Verdict.model_validate(plain(g.output)) for g in grades}
        return _episode(calls[0], verdicts)
    finally:
        tracer.close()

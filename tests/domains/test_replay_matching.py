"""The replay domain matches a call to a recording by normalised arguments, free text loosely (the
nearest wording) unless `matching` (the task's state, or a domain subclass) says which
arguments identify a call: a model that words a free-text argument its own way still gets
production's answer. A call production never made answers like the nearest recording of its
tool, with the call's own values where the answer echoed the recorded call's."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, ClassVar

import jsonschema
import pytest
import yaml

from harness.domains import ToolError
from harness.domains.replay import ArgumentMatch, ReplayEnvironment, ReplayState
from harness.specs.schema import json_schema


def replay(state: dict, domain: type[ReplayEnvironment] = ReplayEnvironment) -> ReplayEnvironment:
    return domain.for_state(state)(state)  # type: ignore[return-value]


def tool(name: str, *arguments: str) -> dict[str, Any]:
    properties = {argument: {"type": "string"} for argument in arguments}
    return {"name": name, "parameters": {"type": "object", "properties": properties}}


STATE: dict[str, Any] = {
    "tools": [
        tool("create_ticket", "customer_id", "summary"),
        tool("add_note", "ticket_id", "text"),
    ],
    "recordings": [
        {
            "tool": "create_ticket",
            "arguments": {"customer_id": "C-1", "summary": "VPN down since morning"},
            "result": {"ticket_id": "T-1"},
        },
        {
            "tool": "create_ticket",
            "arguments": {"customer_id": "C-1", "summary": "Printer jammed"},
            "result": {"ticket_id": "T-2"},
        },
        {
            "tool": "add_note",
            "arguments": {"ticket_id": "T-1", "text": "Restarted the router"},
            "result": {"noted": True},
        },
    ],
}


def call(env: ReplayEnvironment, name: str, **arguments: Any) -> Any:
    """The tool's JSON result (a ToolError propagates)."""
    return env.call_data_tool(name, arguments)


def with_matching(matching: dict[str, Any]) -> dict[str, Any]:
    return {**STATE, "matching": matching}


def strict(state: dict[str, Any]) -> dict[str, Any]:
    """The state with unrecorded calls answering a tool error, to see what matched."""
    return {**state, "unrecorded": "error"}


def test_string_arguments_match_whatever_their_case_spacing_and_unicode_form() -> None:
    env = replay(strict(with_matching({"*": {"exact": True}})))
    summary = "  vpn\u00a0DOWN   since\tmorning "  # a no-break space: NFKC makes it a space
    assert call(env, "create_ticket", customer_id="c-1", summary=summary) == {"ticket_id": "T-1"}
    with pytest.raises(ToolError, match="no recorded result for create_ticket"):
        call(env, "create_ticket", customer_id="C-1", summary="vpn is down since this morning")


def test_free_text_is_matched_loosely_by_default_by_its_nearest_wording() -> None:
    env = replay(strict(STATE))
    # asked in the other order than production, each worded its own way
    printer = call(env, "create_ticket", customer_id="C-1", summary="the printer is jammed again")
    vpn = call(env, "create_ticket", customer_id="C-1", summary="vpn is down since this morning")
    assert (printer, vpn) == ({"ticket_id": "T-2"}, {"ticket_id": "T-1"})
    assert call(env, "add_note", ticket_id="t-1", text="router restarted") == {"noted": True}
    with pytest.raises(ToolError, match="no recorded result for create_ticket"):  # not an id
        call(env, "create_ticket", customer_id="C-2", summary="VPN down since morning")


def test_keys_match_only_the_named_arguments_in_recorded_order() -> None:
    env = replay(strict(with_matching({"create_ticket": {"keys": ["customer_id"]}})))
    worded = "vpn is down since this morning"
    assert call(env, "create_ticket", customer_id="C-1", summary=worded) == {"ticket_id": "T-1"}
    assert call(env, "create_ticket", customer_id="C-1", summary="x") == {"ticket_id": "T-2"}
    assert call(env, "create_ticket", customer_id="C-1", summary="y") == {"ticket_id": "T-2"}
    with pytest.raises(ToolError, match="no recorded result for add_note"):  # another ticket
        call(env, "add_note", ticket_id="T-2", text="Restarted the router")


def test_ignore_matches_every_argument_but_the_named_ones() -> None:
    env = replay(strict(with_matching({"add_note": {"ignore": ["text"]}})))
    assert call(env, "add_note", ticket_id="T-1", text="router restarted") == {"noted": True}
    with pytest.raises(ToolError, match=r'no recorded result for add_note\(ticket_id="T-9"'):
        call(env, "add_note", ticket_id="T-9", text="Restarted the router")


def test_a_star_entry_applies_to_every_tool_and_a_tool_entry_comes_first() -> None:
    env = replay(strict(with_matching({"*": {"ignore": ["summary", "text"]}})))
    assert call(env, "create_ticket", customer_id="C-1", summary="a") == {"ticket_id": "T-1"}
    assert call(env, "add_note", ticket_id="T-1", text="b") == {"noted": True}
    env = replay(
        strict(with_matching({"*": {"ignore": ["text"]}, "create_ticket": {"exact": True}}))
    )
    assert call(env, "add_note", ticket_id="T-1", text="b") == {"noted": True}
    with pytest.raises(ToolError, match="no recorded result for create_ticket"):
        call(env, "create_ticket", customer_id="C-1", summary="a")


class TicketReplay(ReplayEnvironment):
    """A domain that knows a ticket's summary is free text."""

    matching: ClassVar[dict[str, ArgumentMatch]] = {
        "create_ticket": ArgumentMatch(keys=["customer_id"])
    }


def test_a_domain_subclass_sets_matching_and_the_state_overrides_it() -> None:
    env = replay(strict(STATE), TicketReplay)
    assert call(env, "create_ticket", customer_id="C-1", summary="vpn") == {"ticket_id": "T-1"}
    exact = replay(strict(with_matching({"create_ticket": {"exact": True}})), TicketReplay)
    with pytest.raises(ToolError, match="no recorded result for create_ticket"):
        call(exact, "create_ticket", customer_id="C-1", summary="vpn")
    with pytest.raises(ToolError):  # the base class's matching is untouched: C-7 is no id seen
        call(replay(strict(STATE)), "create_ticket", customer_id="C-7", summary="vpn")


def test_an_unmatched_call_keeps_its_clear_tool_error_and_the_fallback() -> None:
    env = replay(strict(with_matching({"create_ticket": {"keys": ["customer_id"]}})))
    outcome = asyncio.run(env.call("create_ticket", {"customer_id": "C-7", "summary": "hi"}))
    assert outcome.is_error
    assert outcome.content == (
        'Error: no recorded result for create_ticket(customer_id="C-7", summary="hi"): '
        "production never made this call, so the replay cannot answer it"
    )
    fallback = {**with_matching({"*": {"keys": ["customer_id"]}}), "fallback": {"*": {"result": 0}}}
    assert call(replay(fallback), "create_ticket", customer_id="C-7", summary="hi") == 0


CLAIMS: dict[str, Any] = {
    "tools": [
        {
            "name": "file_claim",
            "parameters": {
                "type": "object",
                "properties": {
                    "policy": {"type": "string"},
                    "coverage": {"type": "string", "enum": ["flood", "water", "fire"]},
                    "summary": {"type": "string"},
                },
            },
        },
        tool("upload_document", "claim_id", "filename"),
        tool("lookup_claim", "claim_id"),
        tool("close_claim", "claim_id"),
    ],
    "recordings": [
        {
            "tool": "file_claim",
            "arguments": {"policy": "P-1", "coverage": "flood", "summary": "Pipe burst upstairs"},
            "result": {"claim_id": "CLM-501", "coverage": "flood", "status": "filed"},
        },
        {
            "tool": "upload_document",
            "arguments": {"claim_id": "CLM-501", "filename": "leak.jpg"},
            "result": {"status": "failed", "reason": "leak.jpg is larger than 10 MB"},
        },
        {
            "tool": "upload_document",
            "arguments": {"claim_id": "CLM-501", "filename": "receipt.pdf"},
            "result": {"status": "uploaded", "document": "receipt.pdf"},
        },
        {
            "tool": "lookup_claim",
            "arguments": {"claim_id": "CLM-5O1"},
            "error": "ClaimNotFound: no claim CLM-5O1",
        },
    ],
}


def test_an_unrecorded_call_answers_like_the_nearest_recording_with_its_own_values() -> None:
    env = replay(CLAIMS)
    # the fix's corrected filing: production never made it; it succeeds in the recorded shape,
    # reading back the corrected coverage (and the summary, worded anew, matches loosely)
    filed = call(env, "file_claim", policy="P-1", coverage="water", summary="a pipe burst")
    assert filed == {"claim_id": "CLM-501", "coverage": "water", "status": "filed"}
    # an upload production never made succeeds like the one that did, not like the failure
    assert call(env, "upload_document", claim_id="CLM-501", filename="floor.png") == {
        "status": "uploaded",
        "document": "floor.png",
    }
    # the recorded failure still answers the call production made
    assert call(env, "upload_document", claim_id="CLM-501", filename="leak.jpg")["status"] == (
        "failed"
    )
    # a read of another value answers like the nearest recording: here the recorded error
    with pytest.raises(ToolError, match="ClaimNotFound: no claim CLM-777"):
        call(env, "lookup_claim", claim_id="CLM-777")
    # a tool production never called has nothing to answer like
    with pytest.raises(ToolError, match="no recorded result for close_claim"):
        call(env, "close_claim", claim_id="CLM-501")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"keys": ["a"], "ignore": ["b"]}, "exactly one of `exact: true`, `keys` or `ignore`"),
        ({}, "give one of `exact: true`, `keys` or `ignore`"),
        ({"exact": False}, "`exact` can only be true"),
        ({"key": ["a"]}, "Extra inputs are not permitted"),
    ],
)
def test_a_bad_matching_entry_is_refused(entry: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ReplayState.model_validate(with_matching({"create_ticket": entry}))


def test_matching_names_only_offered_tools() -> None:
    with pytest.raises(ValueError, match="matching of tools not in `tools`: lookup"):
        ReplayState.model_validate(with_matching({"lookup": {"exact": True}}))


def test_schema_task_documents_the_replay_state(cli) -> None:
    result = cli("schema", "task")
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    state = schema["$defs"]["ReplayState"]["properties"]
    for key in ("tools", "recordings", "fallback", "matching", "unrecorded"):
        assert state[key]["description"], key
    match = schema["$defs"]["ArgumentMatch"]["properties"]
    assert all(match[name]["description"] for name in ("exact", "keys", "ignore"))
    assert "`domain: replay`" in schema["$defs"]["ReplayState"]["description"]


def task(state: dict[str, Any], domain: str = "replay") -> dict[str, Any]:
    return {
        "kind": "task",
        "id": "r",
        "title": "t",
        "level": 1,
        "domain": domain,
        "persona": {
            "name": "p",
            "description": "d",
            "model": "scripted",
            "scripted_turns": [{"reply": "bye ###STOP###"}],
        },
        "scenario": {"reason": "r"},
        "start": {"first_message": "hi", "state": state},
        "checks": [{"kind": "no_error"}],
    }


def test_the_task_schema_checks_a_replay_state_only_under_domain_replay() -> None:
    schema = json_schema("task", {"replay": ReplayState})
    jsonschema.validate(task(with_matching({"*": {"keys": ["customer_id"]}})), schema)
    jsonschema.validate(task({"matching": {"*": {"ignore": ["x"]}}}), schema)  # over state_file
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(task({"fallbak": {}}), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(task({"matching": {"*": {"keys": [], "ignore": []}}}), schema)
    jsonschema.validate(task({"fallbak": {}}, domain="support"), schema)


def test_validate_names_a_bad_matching_entry_in_one_line(cli, tmp_path: Path) -> None:
    bad = with_matching({"create_ticket": {"keys": ["customer_id"], "ignore": ["summary"]}})
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(task(bad)))
    result = cli("validate", path)
    assert result.exit_code == 2
    problems = [line for line in result.stderr.splitlines() if "matching" in line]
    assert len(problems) == 1, result.stderr
    assert "start.state.matching.create_ticket" in problems[0]
    assert (
        "give exactly one of `exact: true`, `keys` or `ignore`, not keys and ignore"
        in (problems[0])
    )

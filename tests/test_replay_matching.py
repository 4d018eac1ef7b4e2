"""The replay domain matches a call to a recording by normalised arguments, and by the arguments
that `matching` (the task's state, or a domain subclass) says identify a call: a model that
words a free-text argument its own way still gets production's answer."""

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


def test_string_arguments_match_whatever_their_case_spacing_and_unicode_form() -> None:
    env = replay(STATE)
    summary = "  vpn\u00a0DOWN   since\tmorning "  # a no-break space: NFKC makes it a space
    assert call(env, "create_ticket", customer_id="c-1", summary=summary) == {"ticket_id": "T-1"}
    with pytest.raises(ToolError, match="no recorded result for create_ticket"):
        call(env, "create_ticket", customer_id="C-1", summary="vpn is down since this morning")


def test_keys_match_only_the_named_arguments_in_recorded_order() -> None:
    env = replay(with_matching({"create_ticket": {"keys": ["customer_id"]}}))
    worded = "vpn is down since this morning"
    assert call(env, "create_ticket", customer_id="C-1", summary=worded) == {"ticket_id": "T-1"}
    assert call(env, "create_ticket", customer_id="C-1", summary="x") == {"ticket_id": "T-2"}
    assert call(env, "create_ticket", customer_id="C-1", summary="y") == {"ticket_id": "T-2"}
    with pytest.raises(ToolError, match="no recorded result for add_note"):  # exact elsewhere
        call(env, "add_note", ticket_id="T-1", text="router restarted")


def test_ignore_matches_every_argument_but_the_named_ones() -> None:
    env = replay(with_matching({"add_note": {"ignore": ["text"]}}))
    assert call(env, "add_note", ticket_id="T-1", text="router restarted") == {"noted": True}
    with pytest.raises(ToolError, match=r'no recorded result for add_note\(ticket_id="T-9"'):
        call(env, "add_note", ticket_id="T-9", text="Restarted the router")


def test_a_star_entry_applies_to_every_tool_and_a_tool_entry_comes_first() -> None:
    env = replay(with_matching({"*": {"ignore": ["summary", "text"]}}))
    assert call(env, "create_ticket", customer_id="C-1", summary="a") == {"ticket_id": "T-1"}
    assert call(env, "add_note", ticket_id="T-1", text="b") == {"noted": True}
    env = replay(with_matching({"*": {"ignore": ["text"]}, "create_ticket": {"exact": True}}))
    assert call(env, "add_note", ticket_id="T-1", text="b") == {"noted": True}
    with pytest.raises(ToolError, match="no recorded result for create_ticket"):
        call(env, "create_ticket", customer_id="C-1", summary="a")


class TicketReplay(ReplayEnvironment):
    """A domain that knows a ticket's summary is free text."""

    matching: ClassVar[dict[str, ArgumentMatch]] = {
        "create_ticket": ArgumentMatch(keys=["customer_id"])
    }


def test_a_domain_subclass_sets_matching_and_the_state_overrides_it() -> None:
    env = replay(STATE, TicketReplay)
    assert call(env, "create_ticket", customer_id="C-1", summary="vpn") == {"ticket_id": "T-1"}
    strict = replay(with_matching({"create_ticket": {"exact": True}}), TicketReplay)
    with pytest.raises(ToolError, match="no recorded result for create_ticket"):
        call(strict, "create_ticket", customer_id="C-1", summary="vpn")
    with pytest.raises(ToolError):  # the base class's matching is untouched
        call(replay(STATE), "create_ticket", customer_id="C-1", summary="vpn")


def test_an_unmatched_call_keeps_its_clear_tool_error_and_the_fallback() -> None:
    env = replay(with_matching({"create_ticket": {"keys": ["customer_id"]}}))
    outcome = asyncio.run(env.call("create_ticket", {"customer_id": "C-7", "summary": "hi"}))
    assert outcome.is_error
    assert outcome.content == (
        'Error: no recorded result for create_ticket(customer_id="C-7", summary="hi"): '
        "production never made this call, so the replay cannot answer it"
    )
    fallback = {**with_matching({"*": {"keys": ["customer_id"]}}), "fallback": {"*": {"result": 0}}}
    assert call(replay(fallback), "create_ticket", customer_id="C-7", summary="hi") == 0


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
    for key in ("tools", "recordings", "fallback", "matching"):
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

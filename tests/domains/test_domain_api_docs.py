"""Issue 30 (domain API): a tool's parameters carry descriptions (`Annotated[T, Field(...)]` or
the docstring's `Args:` section), a tool that raises answers the agent with the exception's type
and message, and a variant's prompt quotes the task's domain with `{domain.policy}` and
`{domain.description}`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from harness.domains import Environment, tool
from harness.domains.docstrings import parse_tool_doc
from harness.sim.suite import load_cases
from harness.specs.agent import AgentVariant
from harness.specs.load import load_agent
from harness.specs.script import Script
from harness.testing.fake_server import FakeServer
from harness.transcript import EndReason, Transcript
from tests.conftest import play_case, run_cli

CLINIC = f"{__name__}:Clinic"
POLICY = "Book only open slots; never book a patient twice on one day."
DESCRIPTION = "A dental clinic's front desk."


class Clinic(Environment):
    """A clinic's calendar."""

    domain = "docs-clinic"
    description = DESCRIPTION
    policy = POLICY

    @tool
    def find_patient(
        self,
        email: Annotated[str, Field(description="The patient's email address.")],
        active: bool = True,
    ) -> dict[str, Any]:
        """Find a patient by email address."""
        return {"patient_id": "P-1"}

    @tool
    def book(self, patient_id: str, date: str, note: str = "") -> dict[str, Any]:
        """Book a visit.

        Only open slots can be booked.

        Args:
            patient_id: The patient's id,
                as find_patient gave it.
            date (str): The day, as YYYY-MM-DD.

        Returns:
            The booking.

        Raises:
            ValueError: the date is not a date.
        """
        if date == "someday":
            raise ValueError("bad date")
        if date == "never":
            raise ValueError()
        return {"booked": date}

    @tool
    def list_slots(self, day: str) -> list[str]:
        """List a day's open slots."""
        return []


def test_parameter_descriptions_come_from_annotated_fields_and_the_docstring() -> None:
    find_patient, book, list_slots = Clinic.tool_specs(["find_patient", "book", "list_slots"])
    assert find_patient.description == "Find a patient by email address."
    assert find_patient.parameters == {
        "additionalProperties": False,
        "properties": {
            "email": {"description": "The patient's email address.", "type": "string"},
            "active": {"default": True, "type": "boolean"},
        },
        "required": ["email"],
        "type": "object",
    }
    # the docstring's Args, Returns and Raises sections leave the description
    assert book.description == "Book a visit.\n\nOnly open slots can be booked."
    assert book.parameters == {
        "additionalProperties": False,
        "properties": {
            "patient_id": {
                "description": "The patient's id, as find_patient gave it.",
                "type": "string",
            },
            "date": {"description": "The day, as YYYY-MM-DD.", "type": "string"},
            "note": {"default": "", "type": "string"},
        },
        "required": ["patient_id", "date"],
        "type": "object",
    }
    # neither: exactly as before
    assert list_slots.description == "List a day's open slots."
    assert list_slots.parameters == {
        "additionalProperties": False,
        "properties": {"day": {"type": "string"}},
        "required": ["day"],
        "type": "object",
    }


def test_a_field_description_wins_and_a_plain_string_describes() -> None:
    class Desk(Environment):
        @tool
        def close(
            self,
            ticket_id: Annotated[str, Field(description="From the Field.", min_length=2)],
            reason: Annotated[str, "From the string."],
        ) -> dict[str, Any]:
            """Close a ticket.

            Args:
                ticket_id: From the docstring.
                reason: From the docstring too.
            """
            return {}

    [spec] = Desk.tool_specs()
    assert spec.description == "Close a ticket."
    assert spec.parameters["properties"] == {
        "ticket_id": {"description": "From the Field.", "minLength": 2, "type": "string"},
        "reason": {"description": "From the string.", "type": "string"},
    }
    assert asyncio.run(Desk({}).call("close", {"ticket_id": "T", "reason": "x"})).is_error


def test_numpy_and_sphinx_docstrings_and_sections_without_parameters() -> None:
    numpy = parse_tool_doc(
        "Add two numbers.\n\nParameters\n----------\nx, y : int\n    The numbers,\n"
        "    both of them.\n\nReturns\n-------\nint\n    Their sum."
    )
    assert numpy.description == "Add two numbers."
    assert numpy.parameters == {
        "x": "The numbers, both of them.",
        "y": "The numbers, both of them.",
    }
    sphinx = parse_tool_doc(
        "Refund an order.\n\n:param order_id: The order.\n:param str reason: Why,\n"
        "    briefly.\n:type order_id: str\n:returns: the refund.\n\nRefunds are final."
    )
    assert sphinx.description == "Refund an order.\n\nRefunds are final."
    assert sphinx.parameters == {"order_id": "The order.", "reason": "Why, briefly."}
    # a docstring documenting no parameter is the description as written
    text = "Cancel an order.\n\nReturns:\n    the cancellation.\n\nNote: final."
    assert parse_tool_doc(text).description == text
    assert parse_tool_doc(text).parameters == {}


def test_domains_show_lists_the_parameter_descriptions() -> None:
    shown = run_cli("domains", "show", CLINIC)
    assert shown.returncode == 0, shown.stderr
    assert f"policy: {POLICY}" in shown.stdout
    lines = shown.stdout.splitlines()
    at = lines.index("  book: Book a visit.")
    assert lines[at + 1 : at + 3] == [
        "    patient_id: The patient's id, as find_patient gave it.",
        "    date: The day, as YYYY-MM-DD.",
    ]
    assert lines[at + 3].startswith('    {"additionalProperties": false')
    assert lines[lines.index("  list_slots: List a day's open slots.") + 1].startswith("    {")


def test_an_exception_of_a_tool_is_its_type_and_message() -> None:
    def call(date: str) -> tuple[bool, str]:
        outcome = asyncio.run(Clinic({}).call("book", {"patient_id": "P-1", "date": date}))
        return outcome.is_error, outcome.content

    assert call("someday") == (True, "Error: ValueError: bad date")
    assert call("never") == (True, "Error: ValueError")
    assert call("2025-03-04") == (False, '{"booked": "2025-03-04"}')


# ------------------------------------------------------------------ episodes


def write_task(folder: Path) -> Path:
    path = folder / "task.yaml"
    path.write_text(
        f"kind: task\nid: booking\ntitle: a booking\nlevel: 1\ndomain: {CLINIC}\n"
        "persona: {name: p, model: scripted, scripted_turns: [{reply: 'thanks ###STOP###'}]}\n"
        "scenario: {reason: a visit}\n"
        "start: {first_message: 'Book me a visit someday, I am P-1.'}\n"
        "checks:\n  - {kind: tool_called, tool: book}\n"
    )
    return path


def play(folder: Path, variant: AgentVariant) -> Transcript:
    [case] = load_cases([write_task(folder)])
    return play_case(case, variant)


# The agent's model books for "someday", then says what the tool answered.
BOOKING = Script.model_validate(
    {
        "kind": "script",
        "rules": [
            {"when": {"tool": "book"}, "reply": "Sorry: {text}"},
            {
                "reply": {
                    "tool_calls": [
                        {"name": "book", "arguments": {"patient_id": "P-1", "date": "someday"}}
                    ]
                }
            },
        ],
    }
)


def test_an_llm_agent_reads_the_domain_policy_and_acts_on_a_tool_exception(
    tmp_path: Path,
) -> None:
    prompt = 'You help at: {domain.description}\nRules:\n{domain.policy}\nAnswer as {"ok": true}.'
    with FakeServer(BOOKING).running() as server:
        variant = AgentVariant.model_validate(
            {
                "kind": "agent",
                "name": "front-desk",
                "model": {"id": "openai/agent", "base_url": f"{server.url}/v1"},
                "system_prompt": prompt,
                "skills": {"dates": "Ask for a date when {domain.policy} is unclear."},
                "tools": ["book"],
            }
        )
        transcript = play(tmp_path, variant)
        systems = [request["messages"][0] for request in server.requests]
    assert (transcript.end_reason, transcript.error) == (EndReason.USER_STOP, None)
    expected = (
        f'You help at: {DESCRIPTION}\nRules:\n{POLICY}\nAnswer as {{"ok": true}}.\n\n'
        f"## dates\nAsk for a date when {POLICY} is unclear."
    )
    assert systems == [{"role": "system", "content": expected}] * 2
    [result] = [m for m in transcript.messages if m.role == "tool"]
    assert (result.is_error, result.content) == (True, "Error: ValueError: bad date")
    assert transcript.assistant_texts()[-1] == "Sorry: Error: ValueError: bad date"
    # without a domain the tokens stay as written; the hash is of the variant as written
    assert variant.full_system_prompt().startswith("You help at: {domain.description}\n")


def test_a_python_agent_reads_the_policy_and_the_filled_prompt(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(
        "from harness.domains import ToolError\n\n"
        "def respond(conversation, tools):\n"
        "    try:\n"
        "        tools.call('book', patient_id='P-1', date='someday')\n"
        "    except ToolError as refusal:\n"
        "        return f'{tools.policy} | {tools.system_prompt} | {refusal}'\n"
    )
    (tmp_path / "agent.yaml").write_text(
        "kind: agent\nname: mine\nrunner: python\nentry: agent.py:respond\n"
        "system_prompt: 'Follow: {domain.policy}'\n"
    )
    transcript = play(tmp_path, load_agent(tmp_path / "agent.yaml").spec)
    assert (transcript.end_reason, transcript.error) == (EndReason.USER_STOP, None)
    assert transcript.assistant_texts()[0] == (
        f"{POLICY} | Follow: {POLICY} | ValueError: bad date"
    )

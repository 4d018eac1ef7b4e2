"""What a production session says, read right: tasks from traces check the failure where it
matters and nothing the agent under test cannot control.

Each behaviour gets a small session of its own, in the Weave call schema an app patched by weave
records (a root op per session in a thread, a turn op per user message, the `openai` client's
calls with the whole history, tool ops below the turn, feedback on the turn's call), converted
by `harness traces to-tasks` as a user runs it:

- a value the server generated (found by data flow, whatever the tool is called) is never
  asserted, but a success task checks that the user was told one of its shape;
- a mistyped id the user gave and the agent handled is no failure; one the agent did not handle
  is a failure whose checks can be passed (no `no_error` at a lookup the replay raises anyway);
- a note's sentiment is read: praise with a thumbs-up is a positive rating, not a failure;
- a reply claiming success after a failed call is a false success whatever else it says;
- an unrated session is a success only with a completed outcome, and never when it repeats a
  decision negative feedback singled out; a success task says why it is one;
- one failing step is one cluster, whatever incidental call shared its turn;
- a note naming a value or a tool becomes a deterministic check;
- emails in a scenario's `known_info` end with their domain, not the sentence's period.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.grading.checks import CheckContext, run_check
from harness.transcript import EndReason, Message, ToolCall, Transcript

SYSTEM = "You are the warranty desk of Applia. Use the tools."
PRODUCTS = ["dishwasher", "dryer", "washer", "water_heater"]


def tool(name: str, **properties: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name.replace('_', ' ')} tool.",
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
            },
        },
    }


STRING = {"type": "string"}
TOOLS = [
    tool("warranty_intake", serial=STRING, product={"type": "string", "enum": PRODUCTS}),
    tool("attach_receipt", ref=STRING, filename=STRING),
    tool("lookup_warranty", ref=STRING),
    tool("escalate_to_human", reason=STRING),
]


class Raise(str):
    """A tool op that raised: `Type: message`."""


@dataclass
class Turn:
    """A user message, the tool calls the agent made for it (name, arguments, result or
    `Raise`), and the reply; `feedback` on the turn's call: (reaction or None, note or None)."""

    said: str
    calls: list[tuple[str, dict[str, Any], Any]] = field(default_factory=list)
    reply: str = ""
    feedback: tuple[str | None, str | None] | None = None


CLOCK = count()


def session(thread: str, *turns: Turn) -> list[dict[str, Any]]:
    """The calls an app patched by weave records for one session (see the module docstring)."""
    minute = next(CLOCK)
    ticks = count()

    def record(call_id: str, op: str, inputs: dict, output: Any, parent: str | None, **extra):
        return {
            "id": call_id,
            "project_id": "applia/desk",
            "op_name": f"weave:///applia/desk/op/{op}:v1",
            "trace_id": f"trace-{thread}",
            "parent_id": parent,
            "thread_id": thread,
            "started_at": f"2026-11-30T{10 + minute // 60:02d}:{minute % 60:02d}:{next(ticks):02d}",
            "inputs": inputs,
            "output": output,
            "exception": None,
            "attributes": {},
            "summary": {},
            "feedback": [],
            **extra,
        }

    root = f"{thread}-root"
    calls = [record(root, "chat_session", {"session": thread}, "ok", None)]
    history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for index, turn in enumerate(turns):
        turn_id = f"{thread}-turn{index}"
        turn_call = record(turn_id, "handle_turn", {"text": turn.said}, turn.reply, root)
        if turn.feedback is not None:
            reaction, note = turn.feedback
            ref = f"weave:///applia/desk/call/{turn_id}"
            if reaction:
                turn_call["feedback"].append(
                    {
                        "feedback_type": "wandb.reaction.1",
                        "payload": {"emoji": reaction},
                        "weave_ref": ref,
                    }
                )
            if note:
                turn_call["feedback"].append(
                    {"feedback_type": "wandb.note.1", "payload": {"note": note}, "weave_ref": ref}
                )
        calls.append(turn_call)
        history.append({"role": "user", "content": turn.said})
        if turn.calls:
            asked = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{thread}_{index}_{n}",
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(arguments)},
                    }
                    for n, (name, arguments, _) in enumerate(turn.calls)
                ],
            }
            calls.append(model_call(record, f"{turn_id}-m0", history, asked, turn_id))
            history.append(asked)
            for n, (name, arguments, result) in enumerate(turn.calls):
                op = record(f"{turn_id}-t{n}", name, arguments, None, turn_id)
                if isinstance(result, Raise):
                    kind, _, message = result.partition(": ")
                    op["exception"] = json.dumps({"type": kind, "message": message})
                    content = str(result)
                else:
                    op["output"] = result
                    content = json.dumps(result)
                calls.append(op)
                history.append(
                    {
                        "role": "tool",
                        "tool_call_id": f"call_{thread}_{index}_{n}",
                        "content": content,
                    }
                )
        answer = {"role": "assistant", "content": turn.reply}
        calls.append(model_call(record, f"{turn_id}-m1", history, answer, turn_id))
        history.append(answer)
    return calls


def model_call(record, call_id: str, history: list[dict], answer: dict, parent: str) -> dict:
    return record(
        call_id,
        "openai.chat.completions.create",
        {"model": "gpt-4.1-mini", "messages": list(history), "tools": TOOLS},
        {"choices": [{"message": answer}]},
        parent,
        attributes={"weave": {"kind": "llm"}},
    )


def convert(cli, tmp_path: Path, *sessions: list[dict]) -> tuple[dict[str, dict], str]:
    """`harness traces to-tasks` on the sessions' export: the tasks by thread (each task under
    every thread it stands for), and what the command reported."""
    source = tmp_path / "calls.jsonl"
    source.write_text("".join(json.dumps(c) + "\n" for s in sessions for c in s))
    out = tmp_path / "tasks"
    result = cli("traces", "to-tasks", "--source", source, "--out", out)
    assert result.exit_code == 0, result.stderr
    assert "Traceback" not in result.stderr
    by_thread = {}
    for path in sorted(out.glob("*.yaml")) if out.exists() else []:
        task = yaml.safe_load(path.read_text())
        for trace in task["source"]["trace_ids"]:
            by_thread[trace.removeprefix("trace-")] = task
    valid = cli("validate", out) if out.exists() else None
    assert valid is None or valid.exit_code == 0, valid.stderr
    return by_thread, result.stderr


def grade(check: dict, *messages: Message) -> str:
    """A check's outcome on a transcript of `messages`."""
    from pydantic import TypeAdapter

    from harness.specs.checks import Check
    from harness.specs.task import Task

    spec = TypeAdapter(Check).validate_python(check)
    task = Task.model_validate(
        {
            "kind": "task",
            "id": "t",
            "title": "t",
            "level": 1,
            "domain": "replay",
            "persona": "p",
            "scenario": {"reason": "r"},
            "checks": [check],
        }
    )
    transcript = Transcript(
        task_id="t",
        variant="v",
        variant_hash="h",
        messages=list(messages),
        end_reason=EndReason.USER_STOP,
    )
    return asyncio.run(run_check(spec, transcript, CheckContext(task))).outcome


def said(text: str) -> Message:
    return Message(role="assistant", content=text)


INTAKE = ("warranty_intake", {"serial": "SN-4410", "product": "dishwasher"})


def registered(ref: str = "WR-7731", product: str = "dishwasher", serial: str = "SN-4410"):
    return (
        "warranty_intake",
        {"serial": serial, "product": product},
        {"ref": ref, "serial": serial, "product": product, "status": "registered"},
    )


# ----------------------------------------------------------------- generated values


def test_a_value_the_server_generated_is_never_asserted_but_its_shape_is_told(
    cli, tmp_path: Path
) -> None:
    tasks, _ = convert(
        cli,
        tmp_path,
        session(
            "intake",
            Turn(
                "Please register my dishwasher, serial SN-4410.",
                [registered()],
                "Registered! Your warranty reference is WR-7731.",
            ),
            Turn(
                "Add receipt.pdf to it please",
                [("attach_receipt", {"ref": "WR-7731", "filename": "receipt.pdf"}, {"ok": True})],
                "I attached receipt.pdf to WR-7731.",
            ),
            Turn("thanks", [], "You're welcome!"),
        ),
    )
    task = tasks["intake"]
    checks = task["checks"]
    assert task["source"]["kind"] == "success"
    assert "WR-7731" not in json.dumps(checks), checks  # a new session gets another reference
    calls = {c["tool"]: c.get("args", {}) for c in checks if c["kind"] == "tool_called"}
    # the serial and product the user gave are asserted; the generated reference is not
    assert calls == {
        "warranty_intake": {"serial": "SN-4410", "product": "dishwasher"},
        "attach_receipt": {"filename": "receipt.pdf"},
    }
    [told] = [c for c in checks if c["kind"] == "text"]
    assert told["name"] == "states the ref warranty_intake returned"
    assert grade(told, said("Your reference is WR-1234.")) == "pass"
    assert grade(told, said("Your warranty is registered.")) == "fail"


# ----------------------------------------------------------------- the user's own input


def mistyped(thread: str, handled: str, *later: Turn) -> list[dict]:
    return session(
        thread,
        Turn(
            "What does my warranty WR-77311 cover?",
            [
                (
                    "lookup_warranty",
                    {"ref": "WR-77311"},
                    Raise("WarrantyNotFound: no warranty WR-77311"),
                )
            ],
            handled,
        ),
        *later,
    )


def test_a_mistyped_id_the_agent_handled_is_no_failure(cli, tmp_path: Path) -> None:
    tasks, _ = convert(
        cli,
        tmp_path,
        mistyped(
            "typo-handled",
            "I couldn't find a warranty WR-77311. Could you check the number?",
            Turn(
                "Sorry, it is WR-7731",
                [("lookup_warranty", {"ref": "WR-7731"}, {"ref": "WR-7731", "until": "2027-05"})],
                "WR-7731 covers your dishwasher until 2027-05.",
            ),
        ),
    )
    task = tasks["typo-handled"]
    assert task["source"]["kind"] == "success"
    assert task["source"]["reasons"] == ["no failure signal and a completed outcome (unrated)"]
    assert "completed-unrated" in task["tags"]
    assert not [c for c in task["checks"] if c["kind"] == "no_error"]
    assert "WR-77311" not in json.dumps(task["checks"])
    assert {"kind": "tool_called", "name": "calls lookup_warranty", "tool": "lookup_warranty",
            "args": {"ref": "WR-7731"}} in task["checks"]  # fmt: skip


def test_a_mistyped_id_the_agent_did_not_handle_gets_checks_that_can_pass(
    cli, tmp_path: Path
) -> None:
    tasks, _ = convert(cli, tmp_path, mistyped("typo-vague", "Sorry, something went wrong."))
    task = tasks["typo-vague"]
    assert task["source"]["kind"] == "failure"
    hard = [c for c in task["checks"] if c.get("hard", True)]
    # the replay raises WarrantyNotFound for WR-77311 whatever the agent does: no check at the
    # lookup, but the handling a correct agent shows
    assert [c["kind"] for c in hard] == ["no_error", "text"]
    assert "tool" not in hard[0]
    told = hard[1]
    asked = Message(
        role="assistant",
        tool_calls=[ToolCall(id="c1", name="lookup_warranty", arguments={"ref": "WR-77311"})],
    )
    failed = Message(
        role="tool",
        tool_call_id="c1",
        name="lookup_warranty",
        content="Error: WarrantyNotFound: no warranty WR-77311",
        is_error=True,
    )
    for reply in (
        "I couldn't find a warranty WR-77311. Could you check the number?",
        "There is no warranty with that reference (WR-77311); please confirm it.",
    ):
        assert grade(told, asked, failed, said(reply)) == "pass", reply
    for reply in ("Sorry, something went wrong.", "Sorry, something went wrong with WR-77311."):
        assert grade(told, asked, failed, said(reply)) == "fail", reply


# ----------------------------------------------------------------- feedback's sentiment


def rated(thread: str, reaction: str | None, note: str | None) -> list[dict]:
    return session(
        thread,
        Turn(
            "Register my dishwasher SN-4410 please",
            [registered()],
            "Registered, reference WR-7731.",
            (reaction, note),
        ),
    )


@pytest.mark.parametrize(
    ("reaction", "note", "kind", "why"),
    [
        ("👍", "Quick and easy, thanks!", "success", "rated positive (1 of 1 session(s))"),
        (None, "Great, clear answer.", "success", "rated positive (1 of 1 session(s))"),
        ("👍", None, "success", "rated positive (1 of 1 session(s))"),
        ("👍", "Thanks, but it registered the wrong product.", "failure", None),
        (None, "It registered the product wrongly.", "failure", None),
        ("👎", "Quick, thanks", "failure", None),
        ("👎", None, "failure", None),
    ],
)
def test_a_notes_sentiment_is_read(cli, tmp_path: Path, reaction, note, kind, why) -> None:
    tasks, _ = convert(cli, tmp_path, rated("rated", reaction, note))
    task = tasks["rated"]
    assert task["source"]["kind"] == kind
    if why is not None:
        assert task["source"]["reasons"] == [why] and "rated-positive" in task["tags"]


# ----------------------------------------------------------------- false success


def upload_turn(reply: str, feedback=None) -> Turn:
    return Turn(
        "Attach receipt.pdf and photo.heic to WR-7731",
        [
            ("attach_receipt", {"ref": "WR-7731", "filename": "receipt.pdf"}, {"ok": True}),
            (
                "attach_receipt",
                {"ref": "WR-7731", "filename": "photo.heic"},
                {"status": "failed", "reason": "unsupported file type .heic"},
            ),
        ],
        reply,
        feedback,
    )


def test_a_reply_claiming_success_after_a_failed_call_is_false_whatever_else_it_says(
    cli, tmp_path: Path
) -> None:
    apology = "I'm sorry to hear that. Done! I attached receipt.pdf and photo.heic to WR-7731."
    honest = (
        "I attached receipt.pdf to WR-7731. Unfortunately photo.heic could not be attached: "
        "unsupported file type .heic."
    )
    tasks, _ = convert(
        cli,
        tmp_path,
        session("sorry-done", upload_turn(apology)),
        session("honest", upload_turn(honest)),
    )
    silent = tasks["sorry-done"]
    assert silent["source"]["kind"] == "failure"
    assert silent["source"]["signature"].startswith("silent | attach_receipt")
    check = next(c for c in silent["checks"] if c["kind"] == "no_false_success")
    assert "honest" not in tasks or tasks["honest"]["source"]["kind"] == "success"

    asked = Message(
        role="assistant",
        tool_calls=[
            ToolCall(id="a", name="attach_receipt", arguments={"ref": "WR-1", "filename": "r.pdf"}),
            ToolCall(
                id="b", name="attach_receipt", arguments={"ref": "WR-1", "filename": "p.heic"}
            ),
        ],
    )
    ok = Message(role="tool", tool_call_id="a", name="attach_receipt", content='{"ok": true}')
    refused = Message(
        role="tool",
        tool_call_id="b",
        name="attach_receipt",
        content='{"status": "failed", "reason": "unsupported file type .heic"}',
    )
    for reply, outcome in (
        ("I'm sorry to hear that. Done! I attached r.pdf and p.heic.", "fail"),
        ("Sorry for the wait! All set.", "fail"),
        ("Done! p.heic is attached now.", "fail"),
        ("I attached r.pdf. I couldn't attach p.heic: that file type is not supported.", "pass"),
        ("Done! Unfortunately p.heic failed: unsupported type.", "pass"),
        ("r.pdf is attached.", "pass"),  # a claim about the call that worked
    ):
        assert grade(check, asked, ok, refused, said(reply)) == outcome, reply


# ----------------------------------------------------------------- sessions of unknown quality


def test_an_unrated_session_is_a_success_only_with_a_completed_outcome(cli, tmp_path: Path) -> None:
    lookup = ("lookup_warranty", {"ref": "WR-7731"}, {"ref": "WR-7731", "until": "2027-05"})
    tasks, report = convert(
        cli,
        tmp_path,
        session("completed", Turn("What does WR-7731 cover?", [lookup], "It runs until 2027-05.")),
        session("asked-back", Turn("I need help with my warranty", [], "What is your reference?")),
        session(
            "abandoned",
            Turn("Is WR-7731 still valid?", [lookup], "Which appliance is it for?"),
            Turn("Forget it.", [], "Understood."),
        ),
        session("no-tools", Turn("hello", [], "Hello! How can I help?")),
    )
    assert set(tasks) == {"completed"}
    assert tasks["completed"]["source"]["reasons"] == [
        "no failure signal and a completed outcome (unrated)"
    ]
    assert "3 session(s) of unknown quality made no success task" in report


def test_an_unrated_session_repeating_a_decision_rated_bad_is_no_success(
    cli, tmp_path: Path
) -> None:
    tasks, report = convert(
        cli,
        tmp_path,
        rated("rated-bad", "👎", "The serial is a dryer's: it should be dryer, not dishwasher."),
        session(
            "same-decision",
            Turn(
                "Register SN-5120",
                [registered("WR-7740", serial="SN-5120")],
                "Registered as WR-7740.",
            ),
        ),
        session(
            "other-decision",
            Turn(
                "Register my washer SN-6001",
                [registered("WR-7741", "washer", "SN-6001")],
                "Registered as WR-7741.",
            ),
        ),
        rated("rated-good", "👍", None),
    )
    assert tasks["rated-bad"]["source"]["kind"] == "failure"
    assert "same-decision" not in tasks  # it would lock production's decision in
    assert tasks["other-decision"]["source"]["kind"] == "success"
    assert tasks["rated-good"]["source"]["kind"] == "success"  # rated: known quality
    assert "1 session(s) of unknown quality" in report


# ----------------------------------------------------------------- one step, one cluster


def test_one_failing_step_is_one_cluster_whatever_else_its_turn_did(cli, tmp_path: Path) -> None:
    def intake(thread: str, with_receipt: bool, feedback) -> list[dict]:
        calls = [registered(f"WR-{len(thread)}{thread[-1]}", serial=f"SN-{len(thread)}0")]
        if with_receipt:
            receipt = {"ref": "WR-1", "filename": "bill.pdf"}
            calls.append(("attach_receipt", receipt, {"ok": True}))
        return session(thread, Turn(f"Register my {thread} machine", calls, "Done, registered.", feedback))  # fmt: skip

    tasks, _ = convert(
        cli,
        tmp_path,
        intake("bad-a", True, ("👎", None)),
        intake("bad-b", False, ("👎", None)),
        intake("bad-c", True, ("👎", None)),
        intake("bad-d", False, ("👎", "Registered a dryer as a dishwasher: it should be dryer.")),
        intake("good-e", True, ("👍", None)),
        session(
            "good-f",
            Turn(
                "Attach bill.pdf to WR-1",
                [("attach_receipt", {"ref": "WR-1", "filename": "bill.pdf"}, {"ok": True})],
                "Attached.",
                ("👍", None),
            ),
        ),
    )
    failures = {id(t): t for t in tasks.values() if t["source"]["kind"] == "failure"}
    [task] = failures.values()
    assert task["source"]["signature"] == "feedback | warranty_intake(product=dishwasher)"
    assert task["source"]["count"] == 4
    # the member whose note names the fix stands for the cluster, and its note is a check
    assert task["source"]["reasons"][0].startswith("negative feedback: Registered a dryer")
    assert {
        "kind": "tool_called",
        "name": "calls warranty_intake with product dryer",
        "tool": "warranty_intake",
        "args": {"serial": "SN-50", "product": "dryer"},
    } in task["checks"]


# ----------------------------------------------------------------- notes become checks


@pytest.mark.parametrize(
    ("note", "expected"),
    [
        (
            "Filed as a dishwasher, should be water heater.",
            [
                (
                    "calls warranty_intake with product water_heater",
                    {"serial": "SN-4410", "product": "water_heater"},
                    None,
                ),
                (
                    "never calls warranty_intake with product dishwasher",
                    {"product": "dishwasher"},
                    0,
                ),
            ],
        ),
        (
            "It is a dryer, not a dishwasher!",
            [
                (
                    "calls warranty_intake with product dryer",
                    {"serial": "SN-4410", "product": "dryer"},
                    None,
                ),
                (
                    "never calls warranty_intake with product dishwasher",
                    {"product": "dishwasher"},
                    0,
                ),
            ],
        ),
        (
            "The customer was angry: should have used escalate_to_human.",
            [("calls escalate_to_human", {}, None)],
        ),
        ("The other product line was meant; not helpful at all.", []),
    ],
)
def test_a_note_naming_a_value_or_a_tool_is_a_deterministic_check(
    cli, tmp_path: Path, note: str, expected: list
) -> None:
    tasks, _ = convert(cli, tmp_path, rated("noted", "👎", note))
    checks = tasks["noted"]["checks"]
    decided = [
        (c["name"], c.get("args", {}), c.get("max_count"))
        for c in checks
        if c["kind"] == "tool_called"
    ]
    assert decided == expected
    judge = next(c for c in checks if c["kind"] == "llm_judge")
    assert note in judge["criterion"] and judge["hard"] is False


# ----------------------------------------------------------------- the scenario


def test_known_info_emails_end_with_their_domain(cli, tmp_path: Path) -> None:
    tasks, _ = convert(
        cli,
        tmp_path,
        session(
            "email",
            Turn(
                "Register SN-4410 for me, my email is jo.ng@applia-mail.example.",
                [registered()],
                "Registered, reference WR-7731.",
                ("👍", None),
            ),
        ),
    )
    known = tasks["email"]["scenario"]["known_info"]
    assert known["email"] == "jo.ng@applia-mail.example"
    assert re.fullmatch(r"[\w.]+@[\w-]+(\.[\w-]+)+", known["email"])

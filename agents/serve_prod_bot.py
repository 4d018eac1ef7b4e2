"""Serve a few production sessions of the support bot into the local Weave trace store, as a
stand-in for a deployed agent: one session crashes, one gets a thumbs-down with a note, others go
well. Then `harness traces to-tasks --source local` turns them into regression tasks.

Run: python agents/serve_prod_bot.py [.harness/prod-traces.db]
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import prod_bot

from harness.domains import ToolError, get_domain
from harness.specs.references import read_json
from harness.tracing import record_locally

DESK = Path(__file__).resolve().parents[1] / "tasks/support/data/desk.json"

# session id -> the customer's turns (and the note of a thumbs-down, if the customer gave one)
SESSIONS: dict[str, tuple[list[str], str | None]] = {
    "s-1001": (["Hi, where is my order O-1002?", "Great, thanks!"], None),
    "s-1002": (["Where is my order O-1003? It's been days."], None),
    "s-1003": (
        ["I want a refund for order O-1004, the stand wobbles.", "Thanks."],
        "Refunded O-1004, delivered 80 days ago: refunds are only allowed within 30 days.",
    ),
    "s-1004": (["Refund order O-1001 please, the headphones broke."], None),
    "s-1005": (["Where is my order O-1005?"], None),
}


# A reviewer's label on the complained-about session: what the bot should have done.
EXPECTED = {"s-1003": {"must_not_call": ["issue_refund"], "answer": "30 days"}}


class DeskTools:
    """Production's tool client, over a copy of the desk's data. Production's refund API does
    not enforce the refund window: the bot must."""

    def __init__(self) -> None:
        self.desk = get_domain("support")({**read_json(DESK), "refund_window_days": 10_000})

    def call(self, name: str, **arguments: Any) -> Any:
        outcome = asyncio.run(self.desk.call(name, arguments))
        if outcome.is_error:
            raise ToolError(outcome.content.removeprefix("Error: "))
        return json.loads(outcome.content)


def serve(store: Path) -> None:
    """Play every session through the production bot, traced into `store`."""
    import weave

    tracer = record_locally(store)  # as a deployed app would, once at start-up
    try:
        for session, (turns, complaint) in SESSIONS.items():
            tools, conversation = DeskTools(), []
            with weave.thread(session):
                for said in turns:
                    conversation.append({"role": "user", "content": said})
                    # .call returns the weave call too: a crash is recorded there, not raised
                    reply, call = prod_bot.handle_turn.call(conversation, tools)
                    if call.exception:
                        break
                    conversation.append({"role": "assistant", "content": reply})
                if complaint:
                    call.feedback.add_reaction("👎")
                    call.feedback.add_note(complaint)
                if session in EXPECTED:
                    call.feedback.add("expected", EXPECTED[session])
    finally:
        tracer.close()


if __name__ == "__main__":
    serve(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".harness/prod-traces.db"))

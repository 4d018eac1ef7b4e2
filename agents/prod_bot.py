"""The Acme support bot as it runs in production: plain Python, instrumented with Weave.

Conventions the harness reads back from the traces (see harness/production/reconstruct.py):
- each customer turn is one `@weave.op(kind="agent")` call whose input `conversation` is the
  conversation so far (role/content dicts, newest last) and whose output is the reply text;
- each tool is an `@weave.op(kind="tool")` call under it, named after the tool, with the tool's
  arguments as inputs and its result as output (or the exception it raised);
- a customer session is a `weave.thread(session_id)`.

`respond` is production as deployed, with two bugs that traces will reveal: it crashes on an
order that has no tracking number yet, and it refunds delivered orders without checking the
refund window. `respond_fixed` is the fixed candidate. Both run as `python` agents under test
(prod-bot.yaml, prod-bot-fixed.yaml); `serve_prod_bot.py` serves a few production sessions.
"""

from __future__ import annotations

import re
from typing import Any

import weave

ORDER_ID = re.compile(r"\bO-\d+\b")
WANTS_REFUND = re.compile(r"refund|money back", re.IGNORECASE)
WANTS_HUMAN = re.compile(r"human|manager|person", re.IGNORECASE)
WINDOW_DAYS = 30


def _without(*names: str) -> Any:
    """Leave objects that are not data (self, the tool handle) out of the recorded inputs."""
    return lambda inputs: {k: v for k, v in inputs.items() if k not in names}


class Backend:
    """The desk's tools as production calls them, each traced as a tool op."""

    def __init__(self, tools: Any):
        self.tools = tools  # the harness's tool handle, or production's own client

    @weave.op(kind="tool", postprocess_inputs=_without("self"))
    def get_order(self, order_id: str) -> dict[str, Any]:
        return self.tools.call("get_order", order_id=order_id)

    @weave.op(kind="tool", postprocess_inputs=_without("self"))
    def issue_refund(self, order_id: str, reason: str) -> dict[str, Any]:
        return self.tools.call("issue_refund", order_id=order_id, reason=reason)

    @weave.op(kind="tool", postprocess_inputs=_without("self"))
    def transfer_to_human(self, summary: str) -> dict[str, Any]:
        return self.tools.call("transfer_to_human", summary=summary)


def _reply(conversation: list[dict[str, str]], backend: Backend, fixed: bool) -> str:
    said = conversation[-1]["content"]
    if WANTS_HUMAN.search(said):
        backend.transfer_to_human(summary=said)
        return "I've passed you to a colleague."
    order_ids = ORDER_ID.findall(said)
    if not order_ids:
        return "Could you give me your order number?"
    order = backend.get_order(order_id=order_ids[-1])
    if WANTS_REFUND.search(said):
        late = (order.get("days_since_delivery") or 0) > WINDOW_DAYS
        if fixed and (order["status"] != "delivered" or late):
            return (
                f"I'm sorry, order {order['order_id']} can't be refunded: refunds are only "
                f"possible within {WINDOW_DAYS} days of delivery."
            )
        refund = backend.issue_refund(order_id=order["order_id"], reason="customer request")
        return f"Done: refund {refund['refund_id']} of ${refund['amount']:.2f} is on its way."
    if fixed and not order.get("tracking"):
        return f"Order {order['order_id']} is {order['status']}; it has not shipped yet."
    tracking = order["tracking"].upper()  # production bug: no tracking number before shipping
    return f"Order {order['order_id']} is {order['status']}, tracking number {tracking}."


@weave.op(kind="agent", postprocess_inputs=_without("tools"))
def handle_turn(conversation: list[dict[str, str]], tools: Any) -> str:
    """Production: one customer turn."""
    return _reply(conversation, Backend(tools), fixed=False)


@weave.op(kind="agent", postprocess_inputs=_without("tools"))
def handle_turn_fixed(conversation: list[dict[str, str]], tools: Any) -> str:
    """The fixed candidate: checks the refund window and handles unshipped orders."""
    return _reply(conversation, Backend(tools), fixed=True)


def respond(conversation: list[dict[str, str]], tools: Any) -> str:
    """Entry point of the `python` agent under test (production)."""
    return handle_turn(conversation, tools)


def respond_fixed(conversation: list[dict[str, str]], tools: Any) -> str:
    """Entry point of the `python` agent under test (fixed)."""
    return handle_turn_fixed(conversation, tools)

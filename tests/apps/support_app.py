"""A small support bot written for the tests, shaped like an app the harness has never seen:
a root op per user turn (`handle_message`), model calls through the real `openai` client (weave
patches `chat.completions.create`, which records the whole history and the `tools` list), tools
as plain functions traced as ops below the turn, sessions grouped by `weave.thread`, and
feedback given through the weave client. Its "model" is `decide`, served by the project's fake
OpenAI server on 127.0.0.1.

Production has two bugs: it cancels an order without looking it up (a not-found `KeyError`
raised in `cancel_order`, which the app catches and apologises for), and it asks for tracking of
an order that has not shipped (a `ValueError` raised in `get_tracking` that crashes the turn);
and it refunds a whole order when one item was broken. `respond` is that logic as a python agent
under test, `respond_fixed` the fixed version.

Record: `python tests/apps/support_app.py STORE MODEL_URL` (a few production sessions, the model
served at MODEL_URL by a `FakeServer(responder=production_model)`); `--hang` instead starts a
turn, flushes, prints `ready` and waits, to be killed.
"""

from __future__ import annotations

import copy
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.domains import ToolError  # noqa: E402

ORDERS: dict[str, dict[str, Any]] = {
    "O-1001": {
        "status": "shipped",
        "items": [{"name": "Headphones", "price": 59.0}],
        "total": 59.0,
        "tracking": {"carrier": "UPS", "number": "1Z999AA10123456784", "eta": "2026-12-03"},
    },
    "O-1003": {
        "status": "delivered",
        "items": [
            {"name": "Mug", "price": 12.99},
            {"name": "Teapot", "price": 54.99},
            {"name": "Tea sampler", "price": 21.99},
        ],
        "total": 89.97,
    },
    "O-1004": {
        "status": "delivered",
        "items": [{"name": "Desk lamp", "price": 45.0}],
        "total": 45.0,
    },
    "O-2002": {"status": "processing", "items": [{"name": "Kettle", "price": 35.5}], "total": 35.5},
}
SESSIONS: dict[str, list[str]] = {
    "s-track": ["Hi, where is my order O-1001?", "Great, thanks!"],
    "s-refund": ["Please refund order O-1004, it arrived broken."],
    "s-cancel-1": ["Please cancel order O-9001."],
    "s-cancel-2": ["Can you cancel my order O-9002? I ordered it by mistake."],
    "s-cancel-3": ["cancel O-9003 pls"],
    "s-unshipped": ["Where is my order O-2002?"],
    "s-mug": ["The mug in order O-1003 arrived broken, please refund it."],
}
NOTE = "Refunded the whole order ($89.97) but only the mug was broken: the right amount is $12.99."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
            },
        },
    }
    for name, description, properties in (
        ("lookup_order", "An order's status, items and total.", {"order_id": {"type": "string"}}),
        ("cancel_order", "Cancel an order that has not shipped.", {"order_id": {"type": "string"}}),
        (
            "get_tracking",
            "The carrier's tracking of a shipped order.",
            {"order_id": {"type": "string"}},
        ),
        (
            "issue_refund",
            "Refund an amount of a delivered order.",
            {"order_id": {"type": "string"}, "amount": {"type": "number"}},
        ),
    )
]
ORDER_ID = re.compile(r"\bO-\d+\b")


class Desk:
    """Production's backend: the orders and what the tools do to them."""

    def __init__(self) -> None:
        self.orders = copy.deepcopy(ORDERS)
        self.refunds = 0

    def _order(self, order_id: str) -> dict[str, Any]:
        if order_id not in self.orders:
            raise KeyError(f"Order {order_id} not found")
        return self.orders[order_id]

    def lookup_order(self, order_id: str) -> dict[str, Any]:
        order = self._order(order_id)
        return {"order_id": order_id, **{k: v for k, v in order.items() if k != "tracking"}}

    def cancel_order(self, order_id: str) -> dict[str, Any]:
        self._order(order_id)["status"] = "cancelled"
        return {"order_id": order_id, "status": "cancelled"}

    def get_tracking(self, order_id: str) -> dict[str, Any]:
        tracking = self._order(order_id).get("tracking")
        if tracking is None:
            raise ValueError(f"carrier has no tracking number for {order_id}")
        return {"order_id": order_id, **tracking}

    def issue_refund(self, order_id: str, amount: float) -> dict[str, Any]:
        self._order(order_id)
        self.refunds += 1
        return {"refund_id": f"R-{5000 + self.refunds}", "order_id": order_id, "amount": amount}


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    call = {"id": f"call_{name}", "type": "function"}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{**call, "function": {"name": name, "arguments": json.dumps(arguments)}}],
    }


def _say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def _results(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """This turn's tool results by tool name (an error result as the text `error: ...`)."""
    names = {
        c["id"]: c["function"]["name"]
        for m in messages
        if m["role"] == "assistant"
        for c in m.get("tool_calls") or []
    }
    found = {}
    for message in messages:
        if message["role"] == "tool":
            content = message["content"]
            found[names[message["tool_call_id"]]] = (
                content if content.startswith("error") else json.loads(content)
            )
    return found


def decide(messages: list[dict[str, Any]], fixed: bool) -> dict[str, Any]:
    """The model: the next assistant message (OpenAI wire format) for the conversation."""
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    said, results = messages[last_user]["content"], _results(messages[last_user:])
    found = ORDER_ID.search(said)
    if found is None:
        return _say(
            "You're welcome! Anything else?" if "thank" in said.lower() else "Your order number?"
        )
    order_id = found.group()
    sorry = f"Sorry, something went wrong with order {order_id}."
    if "cancel" in said.lower():
        if fixed and "lookup_order" not in results:
            return _call("lookup_order", order_id=order_id)
        if fixed and isinstance(results["lookup_order"], str):
            return _say(f"I couldn't find order {order_id}. Could you check the number?")
        if "cancel_order" not in results:
            return _call("cancel_order", order_id=order_id)
        done = not isinstance(results["cancel_order"], str)
        return _say(f"Order {order_id} is cancelled." if done else sorry)
    if "lookup_order" not in results:
        return _call("lookup_order", order_id=order_id)
    order = results["lookup_order"]
    if isinstance(order, str):
        return _say(
            f"I couldn't find order {order_id}. Could you check the number?" if fixed else sorry
        )
    if "refund" in said.lower():
        amount = order["total"]
        if fixed:  # refund the item the customer names, when they name one
            named = [i["price"] for i in order["items"] if i["name"].lower() in said.lower()]
            amount = named[0] if named else amount
        if "issue_refund" not in results:
            return _call("issue_refund", order_id=order_id, amount=amount)
        refund = results["issue_refund"]
        if isinstance(refund, str):
            problem = (
                f"I couldn't complete the refund of ${amount:.2f} for order {order_id} ({refund})."
            )
            return _say(problem if fixed else sorry)
        return _say(
            f"Done: refund {refund['refund_id']} of ${refund['amount']:.2f} for {order_id}."
        )
    if fixed and order["status"] != "shipped":
        return _say(f"Order {order_id} is still {order['status']}: it has not shipped yet.")
    if "get_tracking" not in results:
        return _call("get_tracking", order_id=order_id)
    tracking = results["get_tracking"]
    if isinstance(tracking, str):
        return _say(sorry)
    return _say(
        f"Order {order_id} is on its way with {tracking['carrier']}: tracking number "
        f"{tracking['number']}, expected {tracking['eta']}."
    )


def run_turn(
    history: list[dict[str, Any]],
    complete: Callable[[list[dict[str, Any]]], dict[str, Any]],
    call_tool: Callable[..., Any],
    caught: tuple[type[Exception], ...],
) -> str:
    """One user turn: ask the model, run the tools it asks for, until it answers in text. Errors
    of the `caught` kinds go back to the model as the tool's result; others propagate."""
    for _ in range(6):
        message = complete(history)
        history.append(message)
        if not message.get("tool_calls"):
            return message["content"]
        for call in message["tool_calls"]:
            arguments = json.loads(call["function"]["arguments"])
            try:
                content = json.dumps(call_tool(call["function"]["name"], **arguments))
            except caught as exc:
                content = f"error: {exc}"
            history.append({"role": "tool", "tool_call_id": call["id"], "content": content})
    return "Sorry, I could not finish that."


def _agent(conversation: list[dict[str, str]], tools: Any, fixed: bool) -> str:
    history = [dict(m) for m in conversation]
    return run_turn(history, lambda h: decide(h, fixed), tools.call, (ToolError,))


def respond(conversation: list[dict[str, str]], tools: Any) -> str:
    """Production's logic as a python agent under test."""
    return _agent(conversation, tools, fixed=False)


def respond_fixed(conversation: list[dict[str, str]], tools: Any) -> str:
    """The fixed version: looks orders up before acting, refunds the broken item only."""
    return _agent(conversation, tools, fixed=True)


async def production_model(messages: list[Any]) -> Any:
    """The fake server's responder: production's model, answering in the internal message form."""
    from harness.models import wire_openai

    wire = wire_openai.to_wire_messages(messages)
    return wire_openai.from_wire_messages([decide(wire, fixed=False)])[0]


def record(store: Path, base_url: str, hang: bool = False) -> None:
    """Serve the sessions through the app, its model at `base_url`, recorded with
    `record_locally` into `store`."""
    import openai
    import weave

    from harness.tracing import record_locally

    tracer = record_locally(store)
    desk = Desk()
    tools = {t["function"]["name"]: weave.op(getattr(desk, t["function"]["name"])) for t in TOOLS}
    histories: dict[str, list[dict[str, Any]]] = {}
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="sk-test")

    def complete(history: list[dict[str, Any]]) -> dict[str, Any]:
        system = {"role": "system", "content": "You are the support desk of a tea shop."}
        reply = client.chat.completions.create(
            model="gpt-4.1-mini", messages=[system, *history], tools=TOOLS
        )
        return reply.choices[0].message.model_dump(exclude_none=True)

    @weave.op
    def handle_message(session_id: str, text: str) -> str:
        history = histories.setdefault(session_id, [])
        history.append({"role": "user", "content": text})
        if hang:
            tracer.flush()
            print("ready", flush=True)
            time.sleep(600)
        return run_turn(history, complete, lambda name, **a: tools[name](**a), (LookupError,))

    for session, turns in SESSIONS.items():
        with weave.thread(session):
            for text in turns:
                _, call = handle_message.call(session, text)
                if call.exception:
                    break
            if session == "s-mug":
                call.feedback.add_reaction("👎")
                call.feedback.add_note(NOTE)
    tracer.close()


if __name__ == "__main__":
    record(Path(sys.argv[1]), sys.argv[2], hang="--hang" in sys.argv)

"""The Acme support bot as a team would ship it: plain Python, no framework.

The harness evaluates this exact code as a `python` agent (see support-python.yaml):
`respond(conversation, tools)` gets the visible conversation as role/content dicts and a tool
handle whose `call(name, **arguments)` returns the tool's JSON result or raises on a refusal.
"""

from __future__ import annotations

import re
from typing import Any

ORDER_ID = re.compile(r"\bO-\d+\b")
EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")
WANTS_HUMAN = re.compile(r"human|manager|real person|charged twice", re.IGNORECASE)
WANTS_REFUND = re.compile(r"refund|money back", re.IGNORECASE)
WANTS_CANCEL = re.compile(r"\bcancel", re.IGNORECASE)
ANYTHING_ELSE = " Is there anything else I can do for you?"


def respond(conversation: list[dict[str, str]], tools: Any) -> str:
    """The bot's reply to the customer's latest message."""
    said = conversation[-1]["content"]
    everything_said = " ".join(m["content"] for m in conversation if m["role"] == "user")
    if WANTS_HUMAN.search(said):
        tools.call("transfer_to_human", summary=said)
        return "I've passed your conversation to a colleague, who will contact you shortly."
    if order_ids := ORDER_ID.findall(said):
        return handle_order(order_ids[-1], said, everything_said, tools)
    if emails := EMAIL.findall(said):
        return list_orders_for(emails[-1], tools)
    if WANTS_REFUND.search(said):
        return "I can help with that. What is the email address on your account?"
    return (
        "I can help with orders, refunds, cancellations and address changes. "
        "What is your order number?"
    )


def handle_order(order_id: str, said: str, everything_said: str, tools: Any) -> str:
    try:
        order = tools.call("get_order", order_id=order_id)
        if WANTS_CANCEL.search(said):
            tools.call("cancel_order", order_id=order_id, reason="customer request")
            return f"Order {order_id} is now cancelled." + ANYTHING_ELSE
        if WANTS_REFUND.search(everything_said):
            return refund(order, tools)
    except Exception as refusal:  # the desk refused: tell the customer why
        return f"I'm sorry, I couldn't do that: {refusal}." + ANYTHING_ELSE
    if order["status"] == "shipped":
        return (
            f"Order {order_id} has shipped; the tracking number is {order['tracking']}."
            + ANYTHING_ELSE
        )
    return f"Order {order_id} is {order['status']}." + ANYTHING_ELSE


def refund(order: dict[str, Any], tools: Any) -> str:
    order_id = order["order_id"]
    if order["refundable"]:
        result = tools.call("issue_refund", order_id=order_id, reason="customer request")
        return f"I've refunded ${result['amount']:.2f} for order {order_id}." + ANYTHING_ELSE
    if order["status"] == "processing":
        return (
            f"Order {order_id} hasn't shipped yet, so I can cancel it instead. Shall I cancel it?"
        )
    if order["status"] == "delivered":
        return (
            f"I'm sorry, order {order_id} was delivered {order['days_since_delivery']} days "
            "ago, outside our 30-day refund window." + ANYTHING_ELSE
        )
    return f"Order {order_id} is {order['status']}, so it can't be refunded." + ANYTHING_ELSE


def list_orders_for(email: str, tools: Any) -> str:
    try:
        customer = tools.call("find_customer", email=email)
    except Exception as refusal:
        return f"I'm sorry, {refusal}. Could you check the address?"
    orders = tools.call("list_orders", customer_id=customer["customer_id"])
    listed = ", ".join(f"{o['order_id']} ({o['status']})" for o in orders)
    return f"I found these orders: {listed}. Which one is it?"

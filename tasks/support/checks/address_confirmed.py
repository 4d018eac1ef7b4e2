"""Checker for address-change: the agent read the new address back to the customer."""


def check(transcript):
    order = transcript["final_state"]["orders"]["O-1003"]
    street = order["shipping_address"]["street"]
    replies = [m["content"] for m in transcript["messages"] if m["role"] == "assistant"]
    confirmed = any(street in reply for reply in replies)
    return confirmed, f"street {street!r} {'read back' if confirmed else 'never mentioned'}"

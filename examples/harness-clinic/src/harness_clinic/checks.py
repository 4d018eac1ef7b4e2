"""`no_double_booking`: a check kind of the clinic's own. At the end of the episode no slot holds
two booked appointments, and every booked appointment's slot is marked taken.

A plug-in check kind is one module: a spec model (a `CheckBase` with a `kind` literal; a kind
that names tools, files or state paths in its fields also overrides `references()` so that
`harness validate` checks them) and a handler returning a `Finding`, registered together with
`@register_check`. This module is named by the package's
`harness.checks` entry point, so harness imports it on first use. Everything a plug-in needs
comes from `harness.sdk`.
"""

from __future__ import annotations

from collections import Counter
from typing import Literal

from harness.sdk import CheckBase, CheckContext, Finding, Transcript, register_check


class NoDoubleBookingCheck(CheckBase):
    """No slot is booked twice, and booked slots are closed."""

    kind: Literal["no_double_booking"]


@register_check(NoDoubleBookingCheck)
def check_no_double_booking(
    spec: NoDoubleBookingCheck, transcript: Transcript, context: CheckContext
) -> Finding:
    state = transcript.final_state
    if not isinstance(state.get("appointments"), dict) or not isinstance(state.get("slots"), dict):
        return Finding("error", "the final state has no appointments and slots to check")
    booked = [a["slot_id"] for a in state["appointments"].values() if a["status"] == "booked"]
    twice = sorted(slot for slot, n in Counter(booked).items() if n > 1)
    if twice:
        return Finding("fail", f"slots booked twice: {', '.join(twice)}")
    still_open = sorted(s for s in booked if state["slots"].get(s, {}).get("open", False))
    if still_open:
        return Finding("fail", f"booked slots still open: {', '.join(still_open)}")
    return Finding("pass", f"{len(booked)} booked appointments, one per slot")

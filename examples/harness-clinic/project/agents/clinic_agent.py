"""The clinic's front-desk bot as a team might ship it: plain rules over the clinic's tools.

`respond(conversation, tools)` is called once per patient turn; `tools.call(name, **args)` runs a
tool of the `clinic` domain and returns its JSON result, or raises `ToolError` on a refusal.
"""

from __future__ import annotations

import re
from typing import Any

from harness.sdk import ToolError

DAY = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
APPOINTMENT = re.compile(r"\bA-\d+\b")
NAME = re.compile(r"(?:this is|my name is|i am|i'm)\s+([A-Z][a-z]+ [A-Z][a-z]+)", re.IGNORECASE)
SPECIALTIES = ("dermatolog", "general")


def respond(conversation: list[dict[str, str]], tools: Any) -> str:
    said = " ".join(m["content"] for m in conversation if m["role"] == "user")
    name = NAME.search(said)
    if name is None:
        return "Could I have your full name, please?"
    patients = tools.call("find_patient", name=name.group(1))
    if len(patients) != 1:
        return f"I can't find a patient called {name.group(1)}. Could you spell your name?"
    patient_id = patients[0]["patient_id"]
    try:
        if re.search(r"cancel", said, re.IGNORECASE):
            return cancel(patient_id, said, tools)
        if re.search(r"move|reschedule", said, re.IGNORECASE):
            return move(patient_id, said, tools)
        return book(patient_id, said, tools)
    except ToolError as refusal:
        return f"Sorry, that didn't work: {refusal}. Anything else?"


def book(patient_id: str, said: str, tools: Any) -> str:
    specialty = next((s for s in SPECIALTIES if s in said.lower()), "")
    if not specialty:
        return "Which kind of doctor would you like to see?"
    doctor = tools.call("list_doctors", specialty=specialty)[0]
    slots = tools.call("open_slots", doctor_id=doctor["doctor_id"])
    if not slots:
        return f"{doctor['name']} has no open slots. Anything else?"
    booked = tools.call("book", patient_id=patient_id, slot_id=slots[0]["slot_id"])
    return f"You're booked with {doctor['name']} at {booked['start']}. Anything else?"


def move(patient_id: str, said: str, tools: Any) -> str:
    day = DAY.search(said)
    mine = tools.call("appointments", patient_id=patient_id)
    if not mine:
        return "You have no appointments to move. Anything else?"
    if day is None:
        return "Which day (YYYY-MM-DD) would you like instead?"
    current = mine[0]
    slots = tools.call("open_slots", doctor_id=current["doctor_id"], day=day.group(0))
    if not slots:
        return f"There is nothing free on {day.group(0)}. Anything else?"
    moved = tools.call(
        "reschedule",
        patient_id=patient_id,
        appointment_id=current["appointment_id"],
        slot_id=slots[0]["slot_id"],
    )
    tools.call("send_reminder", patient_id=patient_id, text=f"Your new time: {moved['start']}")
    return f"Moved: your appointment is now at {moved['start']}. Anything else?"


def cancel(patient_id: str, said: str, tools: Any) -> str:
    wanted = APPOINTMENT.search(said)
    mine = tools.call("appointments", patient_id=patient_id)
    chosen = [a for a in mine if wanted is None or a["appointment_id"] == wanted.group(0)]
    if not chosen:
        return "I can't find that appointment under your name. Anything else?"
    appointment_id = chosen[0]["appointment_id"]
    tools.call("cancel", patient_id=patient_id, appointment_id=appointment_id)
    return f"Appointment {appointment_id} is cancelled. Anything else?"


def respond_quick(conversation: list[dict[str, str]], tools: Any) -> str:
    """A candidate that saves a lookup: it cancels the appointment id the patient names
    directly, without checking that it is theirs."""
    said = " ".join(m["content"] for m in conversation if m["role"] == "user")
    name, wanted = NAME.search(said), APPOINTMENT.search(said)
    if name is None or wanted is None or not re.search(r"cancel", said, re.IGNORECASE):
        return respond(conversation, tools)
    patients = tools.call("find_patient", name=name.group(1))
    try:
        tools.call("cancel", patient_id=patients[0]["patient_id"], appointment_id=wanted.group(0))
    except ToolError as refusal:
        return f"Sorry, that didn't work: {refusal}. Anything else?"
    return f"Appointment {wanted.group(0)} is cancelled. Anything else?"

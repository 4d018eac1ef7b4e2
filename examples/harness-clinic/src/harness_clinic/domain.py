"""Patients book, move and cancel appointments with the clinic's doctors.

The state is the clinic's calendar: doctors, patients, time slots and appointments. Tools
enforce what the front desk must: a slot holds one appointment, only a patient's own
appointment can be moved or cancelled, and nothing is booked in the past.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from harness.sdk import Environment, ToolError, tool


class Doctor(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    specialty: str


class Patient(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    phone: str


class Slot(BaseModel):
    model_config = ConfigDict(extra="forbid")
    doctor_id: str
    start: str  # ISO date and time
    open: bool = True


class Appointment(BaseModel):
    model_config = ConfigDict(extra="forbid")
    patient_id: str
    slot_id: str
    status: Literal["booked", "cancelled"] = "booked"


class ClinicState(BaseModel):
    model_config = ConfigDict(extra="forbid")
    today: str
    doctors: dict[str, Doctor]
    patients: dict[str, Patient]
    slots: dict[str, Slot]
    appointments: dict[str, Appointment] = {}
    messages: list[dict[str, str]] = []


class Clinic(Environment):
    """The front desk of a clinic with several doctors."""

    domain = "clinic"
    description = "A clinic's front desk: patients book, move and cancel doctor's appointments."
    policy = (
        "Identify the patient before booking. Book only open slots, never in the past. Move or "
        "cancel only the patient's own appointments, and confirm the new time."
    )
    State = ClinicState

    @tool
    def find_patient(self, name: str) -> list[dict[str, Any]]:
        """Patients whose name contains `name`, with their ids."""
        name = name.lower()
        return [
            {"patient_id": pid, **patient}
            for pid, patient in self.state["patients"].items()
            if name in patient["name"].lower()
        ]

    @tool
    def list_doctors(self, specialty: str = "") -> list[dict[str, Any]]:
        """The clinic's doctors, optionally only those of one specialty."""
        return [
            {"doctor_id": did, **doctor}
            for did, doctor in self.state["doctors"].items()
            if specialty.lower() in doctor["specialty"].lower()
        ]

    @tool
    def open_slots(self, doctor_id: str, day: str = "") -> list[dict[str, Any]]:
        """A doctor's open slots from today on (or on one day, YYYY-MM-DD)."""
        if doctor_id not in self.state["doctors"]:
            raise ToolError(f"no doctor {doctor_id}")
        return [
            {"slot_id": sid, "start": slot["start"]}
            for sid, slot in sorted(self.state["slots"].items(), key=lambda s: s[1]["start"])
            if slot["doctor_id"] == doctor_id
            and slot["open"]
            and slot["start"][:10] >= self.state["today"]
            and slot["start"].startswith(day)
        ]

    @tool
    def book(self, patient_id: str, slot_id: str) -> dict[str, Any]:
        """Book an open slot for a patient."""
        self._patient(patient_id)
        slot = self._open_slot(slot_id)
        appointment_id = f"A-{len(self.state['appointments']) + 1}"
        slot["open"] = False
        self.state["appointments"][appointment_id] = {
            "patient_id": patient_id,
            "slot_id": slot_id,
            "status": "booked",
        }
        return {"appointment_id": appointment_id, "start": slot["start"]}

    @tool
    def appointments(self, patient_id: str) -> list[dict[str, Any]]:
        """A patient's booked appointments."""
        self._patient(patient_id)
        return [
            {"appointment_id": aid, **self.state["slots"][a["slot_id"]], "slot_id": a["slot_id"]}
            for aid, a in self.state["appointments"].items()
            if a["patient_id"] == patient_id and a["status"] == "booked"
        ]

    @tool
    def cancel(self, patient_id: str, appointment_id: str) -> dict[str, Any]:
        """Cancel one of the patient's appointments; its slot opens again."""
        appointment = self._own(patient_id, appointment_id)
        appointment["status"] = "cancelled"
        self.state["slots"][appointment["slot_id"]]["open"] = True
        return {"appointment_id": appointment_id, "status": "cancelled"}

    @tool
    def reschedule(self, patient_id: str, appointment_id: str, slot_id: str) -> dict[str, Any]:
        """Move one of the patient's appointments to another open slot."""
        appointment = self._own(patient_id, appointment_id)
        slot = self._open_slot(slot_id)
        self.state["slots"][appointment["slot_id"]]["open"] = True
        slot["open"] = False
        appointment["slot_id"] = slot_id
        return {"appointment_id": appointment_id, "start": slot["start"]}

    @tool
    def send_reminder(self, patient_id: str, text: str) -> dict[str, Any]:
        """Text the patient (e.g. a confirmation of their new time)."""
        phone = self._patient(patient_id)["phone"]
        self.state["messages"].append({"to": phone, "text": text})
        return {"sent_to": phone}

    def _patient(self, patient_id: str) -> dict[str, Any]:
        patient = self.state["patients"].get(patient_id)
        if patient is None:
            raise ToolError(f"no patient {patient_id}")
        return patient

    def _open_slot(self, slot_id: str) -> dict[str, Any]:
        slot = self.state["slots"].get(slot_id)
        if slot is None:
            raise ToolError(f"no slot {slot_id}")
        if not slot["open"]:
            raise ToolError(f"slot {slot_id} is taken")
        if slot["start"][:10] < self.state["today"]:
            raise ToolError(f"slot {slot_id} is in the past")
        return slot

    def _own(self, patient_id: str, appointment_id: str) -> dict[str, Any]:
        appointment = self.state["appointments"].get(appointment_id)
        if appointment is None or appointment["status"] != "booked":
            raise ToolError(f"no booked appointment {appointment_id}")
        if appointment["patient_id"] != patient_id:
            raise ToolError(f"appointment {appointment_id} is not {patient_id}'s")
        return appointment

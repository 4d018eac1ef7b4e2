"""A clinic's appointment-booking chat agent written for the tests, and the patients who use it:
two known populations of simulated users whose behaviour `harness personas from-traces` should
recover from the app's traces.

The app, as a team might ship it:
- a back end (`ClinicBooking`, also a harness domain: `@tool` methods over a state dict) whose
  calls fail for some inputs: a slot the listing still shows was just taken by another patient,
  an appointment less than 24 hours ahead cannot be moved or cancelled online; the app gets
  these failures as values (`{"error": ...}`), as from a REST API;
- the agent's decision logic (`decide`, deterministic from the conversation), which the fake
  model server runs as the model: it needs the patient id, the date of birth and an email, asks
  for the first one missing, verifies the patient, lists, books, moves or cancels, and says
  plainly when a tool refused ("Sorry, I cannot book that slot: ..."); asked again after a
  refusal it books the next slot, or has the front desk call the patient back;
- recorded with the real weave client (`record_locally`) and the real `openai` client,
  unstreamed, each model call sent the whole session so far as a message list (tool calls and
  results included); a `weave.thread` per session, a root op per session with a turn op per
  user message, tool ops named after the tools; a 👍 or 👎 on some sessions' root call.

The users (`Patient`) are policies that read each reply and answer it, drawn with a fixed seed
from `POPULATIONS`:
- G, "gradual, pushes back": one of the three facts in the first message, then one more per
  agent question; asks back (why the agent needs it) instead of answering in `clarify` of its
  answers; after a refusal pushes back (`pushback`), else restates its first request;
- F, "cooperative, front-loading": all three facts in a polite first message, never asks back;
  after a refusal accepts (`accept`), else pivots to another request (`pivot`).
Both add per-user style noise (filler words, the odd `!`, a lower-case start) that carries no
fact, no question and no insisting word.

Record: `python tests/apps/clinic_booking_app.py STORE MODEL_URL [SESSIONS]`, the model served at
MODEL_URL by a `FakeServer(responder=production_model)`. `simulate()` plays the same sessions
in process, without recording. As a python agent under test: `entry:
tests.apps.clinic_booking_app:respond` (or the file's path), on tasks of `domain:
tests.apps.clinic_booking_app:ClinicBooking` (or `/path/to/clinic_booking_app.py:ClinicBooking`),
whose state `session_world` draws.
"""

from __future__ import annotations

import json
import random
import re
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.models.wire_openai import to_wire_tools  # noqa: E402
from harness.sdk import Environment, ToolError, tool  # noqa: E402

SEED = 2026
SESSIONS = 120
FACT_KINDS = ("patient_id", "date_of_birth", "email")  # what the agent needs, asked in this order
# The two populations' true parameters. `disclosure`: share of its facts the first message
# gives (G gives 1 of the 3, and each of the others when asked: all three by the end);
# `clarify`: share of its answers to an agent question that ask back instead (the persona
# field's meaning); `pushback`, `rephrase`, `accept`, `pivot`: its reactions to a refusal.
POPULATIONS: dict[str, dict[str, float]] = {
    "G": {
        "share": 0.6,
        "disclosure": 1 / len(FACT_KINDS),
        "clarify": 0.2,
        "pushback": 0.7,
        "rephrase": 0.3,
        "accept": 0.0,
        "pivot": 0.0,
    },
    "F": {
        "share": 0.4,
        "disclosure": 1.0,
        "clarify": 0.0,
        "pushback": 0.0,
        "rephrase": 0.0,
        "accept": 0.6,
        "pivot": 0.4,
    },
}
REFUSED = 0.6  # sessions whose first attempt the back end refuses (slot taken, < 24 hours)
THANKS = 0.5  # users who thank the agent once their request is settled
NOW = "2026-12-07T12:00"
PROMPT = "You are the booking assistant of Harbour Clinic. Use the tools to help patients."
DOCTORS = {
    "dermatology": "Dr. Lindqvist",
    "cardiology": "Dr. Okafor",
    "physiotherapy": "Dr. Haddad",
    "general practice": "Dr. Moreau",
}
ADDRESS = "Harbour Clinic is at 14 Harbour Road, second floor, open 8:00 to 18:00 on weekdays."


# ----------------------------------------------------------------------------- back end


class PatientRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    date_of_birth: str  # YYYY-MM-DD
    email: str


class Slot(BaseModel):
    model_config = ConfigDict(extra="forbid")
    specialty: str
    doctor: str
    start: str  # YYYY-MM-DDTHH:MM
    open: bool = True
    taken_meanwhile: bool = False  # booked elsewhere; the listing (a cache) still shows it


class Appointment(BaseModel):
    model_config = ConfigDict(extra="forbid")
    patient_id: str
    slot_id: str
    status: str = "booked"


class ClinicState(BaseModel):
    model_config = ConfigDict(extra="forbid")
    now: str
    patients: dict[str, PatientRecord]
    slots: dict[str, Slot]
    appointments: dict[str, Appointment] = {}
    waitlist: list[dict[str, str]] = []
    callbacks: list[dict[str, str]] = []
    emails: list[dict[str, str]] = []


class ClinicBooking(Environment):
    """Harbour Clinic's booking desk: patients book, move and cancel appointments."""

    domain = "clinic-booking"
    description = "A clinic's booking desk: patients book, move and cancel appointments."
    policy = (
        "Verify the patient (patient id and date of birth) before acting, and send the "
        "confirmation to the email the patient gives. Appointments less than 24 hours ahead "
        "are moved or cancelled by the front desk, never online."
    )
    State = ClinicState

    @tool
    def find_patient(self, patient_id: str, date_of_birth: str) -> dict[str, Any]:
        """The patient's record, when the date of birth (YYYY-MM-DD) matches it."""
        patient = self.state["patients"].get(patient_id)
        if patient is None or patient["date_of_birth"] != date_of_birth:
            raise ToolError(f"no patient {patient_id} with that date of birth")
        return {"patient_id": patient_id, "name": patient["name"]}

    @tool
    def list_slots(self, specialty: str) -> list[dict[str, Any]]:
        """The free slots of a specialty from now on, earliest first."""
        return [
            {"slot_id": sid, "doctor": slot["doctor"], "start": slot["start"]}
            for sid, slot in sorted(self.state["slots"].items(), key=lambda s: s[1]["start"])
            if slot["specialty"] == specialty and slot["open"] and slot["start"] > self.state["now"]
        ]

    @tool
    def book_slot(self, patient_id: str, slot_id: str, email: str) -> dict[str, Any]:
        """Book a free slot for the patient; the confirmation goes to `email`."""
        self._patient(patient_id)
        slot = self._free(slot_id)
        slot["open"] = False
        appointment_id = f"A-{len(self.state['appointments']) + 1}"
        self.state["appointments"][appointment_id] = {
            "patient_id": patient_id,
            "slot_id": slot_id,
            "status": "booked",
        }
        self._confirm(email, f"Booked: {slot['specialty']} on {slot['start']}")
        return {"appointment_id": appointment_id, "doctor": slot["doctor"], "start": slot["start"]}

    @tool
    def appointments(self, patient_id: str) -> list[dict[str, Any]]:
        """The patient's booked appointments."""
        self._patient(patient_id)
        return [
            {"appointment_id": aid, **self._slot_view(a["slot_id"])}
            for aid, a in self.state["appointments"].items()
            if a["patient_id"] == patient_id and a["status"] == "booked"
        ]

    @tool
    def reschedule(
        self, patient_id: str, appointment_id: str, slot_id: str, email: str
    ) -> dict[str, Any]:
        """Move one of the patient's appointments to a free slot of its specialty."""
        appointment = self._changeable(patient_id, appointment_id)
        old = self.state["slots"][appointment["slot_id"]]
        slot = self._free(slot_id)
        if slot["specialty"] != old["specialty"]:
            raise ToolError(f"slot {slot_id} is not a {old['specialty']} slot")
        old["open"], slot["open"] = True, False
        appointment["slot_id"] = slot_id
        self._confirm(email, f"Moved: {slot['specialty']} to {slot['start']}")
        return {"appointment_id": appointment_id, "doctor": slot["doctor"], "start": slot["start"]}

    @tool
    def cancel(self, patient_id: str, appointment_id: str, email: str) -> dict[str, Any]:
        """Cancel one of the patient's appointments; its slot is free again."""
        appointment = self._changeable(patient_id, appointment_id)
        appointment["status"] = "cancelled"
        slot = self.state["slots"][appointment["slot_id"]]
        slot["open"] = True
        self._confirm(email, f"Cancelled: {slot['specialty']} on {slot['start']}")
        return {"appointment_id": appointment_id, "status": "cancelled"}

    @tool
    def add_to_waitlist(self, patient_id: str, specialty: str, email: str) -> dict[str, Any]:
        """Put the patient on a specialty's waiting list; `email` hears of a free slot."""
        self._patient(patient_id)
        if specialty not in DOCTORS:
            raise ToolError(f"no specialty {specialty}")
        self.state["waitlist"].append(
            {"patient_id": patient_id, "specialty": specialty, "email": email}
        )
        return {"position": sum(w["specialty"] == specialty for w in self.state["waitlist"])}

    @tool
    def request_callback(self, patient_id: str, reason: str) -> dict[str, Any]:
        """Ask the front desk to phone the patient today about `reason`."""
        self._patient(patient_id)
        self.state["callbacks"].append({"patient_id": patient_id, "reason": reason})
        return {"callback": f"CB-{len(self.state['callbacks'])}", "when": "today"}

    def _patient(self, patient_id: str) -> dict[str, Any]:
        patient = self.state["patients"].get(patient_id)
        if patient is None:
            raise ToolError(f"no patient {patient_id}")
        return patient

    def _free(self, slot_id: str) -> dict[str, Any]:
        slot = self.state["slots"].get(slot_id)
        if slot is None or not slot["open"] or slot["start"] <= self.state["now"]:
            raise ToolError(f"slot {slot_id} is not free")
        if slot["taken_meanwhile"]:
            slot["open"] = False  # now the listing knows too
            raise ToolError(f"slot {slot_id} was just taken by another patient")
        return slot

    def _changeable(self, patient_id: str, appointment_id: str) -> dict[str, Any]:
        self._patient(patient_id)
        appointment = self.state["appointments"].get(appointment_id)
        if appointment is None or appointment["status"] != "booked":
            raise ToolError(f"no booked appointment {appointment_id}")
        if appointment["patient_id"] != patient_id:
            raise ToolError(f"appointment {appointment_id} is not {patient_id}'s")
        start = datetime.fromisoformat(self.state["slots"][appointment["slot_id"]]["start"])
        if start - datetime.fromisoformat(self.state["now"]) < timedelta(hours=24):
            raise ToolError(
                f"appointment {appointment_id} starts in less than 24 hours; changes go "
                "through the front desk"
            )
        return appointment

    def _slot_view(self, slot_id: str) -> dict[str, Any]:
        slot = self.state["slots"][slot_id]
        return {"specialty": slot["specialty"], "doctor": slot["doctor"], "start": slot["start"]}

    def _confirm(self, email: str, text: str) -> None:
        self.state["emails"].append({"to": email, "text": text})


TOOLS = to_wire_tools(ClinicBooking.tool_specs())


# ----------------------------------------------------------------------------- the agent

PATIENT_ID = re.compile(r"\bP-\d{4}\b")
BIRTH_DATE = re.compile(r"\b(?:19|20)\d{2}-\d{2}-\d{2}\b")
EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
FACT_FINDERS = {"patient_id": PATIENT_ID, "date_of_birth": BIRTH_DATE, "email": EMAIL}
QUESTIONS = {
    "patient_id": "What is your patient id?",
    "date_of_birth": "What is your date of birth?",
    "email": "Which email should the confirmation go to?",
}
WHY = {
    "patient_id": "Your patient id lets me open the right record.",
    "date_of_birth": "I check the date of birth against your record, to be sure it is you.",
    "email": "We send the confirmation and any later change there.",
}
VERBS = {"book": "book", "reschedule": "move", "cancel": "cancel"}
CLOSING = re.compile(r"\b(thanks|thank you|ok|okay|fine|alright|great|perfect|goodbye)\b", re.I)
ACTION_WORDS = re.compile(r"\b(book|move|reschedule|cancel|waiting list|address)\b", re.I)


def found_facts(texts: list[str]) -> dict[str, str]:
    """The facts the agent needs that the texts give (the first of each kind)."""
    found = {}
    for kind, pattern in FACT_FINDERS.items():
        match = next((m for t in texts if (m := pattern.search(t))), None)
        if match:
            found[kind] = match.group()
    return found


def request_of(users: list[str]) -> tuple[str, str]:
    """What the patient wants and for which specialty: the latest request that drops the
    first one (a waiting list, the clinic's address), else the first message's request."""
    for text in reversed(users):
        lowered = text.lower()
        if "waiting list" in lowered or "address" in lowered:
            kind = "waitlist" if "waiting list" in lowered else "address"
            return kind, specialty_in(lowered) or specialty_in(users[0].lower())
    first = users[0].lower()
    kind = (
        "cancel"
        if "cancel" in first
        else "reschedule"
        if re.search(r"\b(move|reschedule)\b", first)
        else "book"
    )
    return kind, specialty_in(first)


def specialty_in(text: str) -> str:
    return next((s for s in DOCTORS if s in text), "")


def _say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def _calls(messages: list[dict[str, Any]], *calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """An assistant message calling tools; ids unique in the session, as a real model's are."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{len(messages)}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for i, (name, arguments) in enumerate(calls)
        ],
    }


def _results(turn: list[dict[str, Any]]) -> dict[str, Any]:
    """This turn's tool results by tool name."""
    names = {
        c["id"]: c["function"]["name"]
        for m in turn
        if m["role"] == "assistant"
        for c in m.get("tool_calls") or []
    }
    return {names[m["tool_call_id"]]: json.loads(m["content"]) for m in turn if m["role"] == "tool"}


def failed(result: Any) -> str | None:
    return result.get("error") if isinstance(result, dict) else None


def when(start: str) -> str:
    day, _, time = start.partition("T")
    return f"{day} at {time}"


def decide(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The model: the next assistant message (OpenAI wire format) for the messages so far."""
    last = max(i for i, m in enumerate(messages) if m["role"] == "user")
    users = [m["content"] for m in messages if m["role"] == "user"]
    said, results = users[-1], _results(messages[last:])
    replies = [m["content"] for m in messages[:last] if m["role"] == "assistant" and m["content"]]
    known = found_facts(users)
    if (
        len(users) > 1
        and not results
        and CLOSING.search(said)
        and not ACTION_WORDS.search(said)
        and not found_facts([said])
    ):
        return _say("You're welcome. Take care!")
    missing = next((kind for kind in FACT_KINDS if kind not in known), None)
    if missing is not None:
        if "?" in said and not found_facts([said]):  # asked why: say why, ask again
            return _say(f"{WHY[missing]} {QUESTIONS[missing]}")
        return _say(QUESTIONS[missing])
    kind, specialty = request_of(users)
    if kind == "address":
        return _say(ADDRESS)
    if kind == "waitlist":
        if "add_to_waitlist" not in results:
            arguments = {"specialty": specialty, "email": known["email"]}
            return _calls(
                messages, ("add_to_waitlist", {"patient_id": known["patient_id"], **arguments})
            )
        if failed(results["add_to_waitlist"]):
            return _say(f"Sorry, I cannot add you: {failed(results['add_to_waitlist'])}.")
        return _say(
            f"You are on the {specialty} waiting list; we will write to {known['email']} as "
            "soon as a slot opens."
        )
    return ACTIONS[kind](messages, known, specialty, results, replies)


def _verified(
    messages: list[dict[str, Any]],
    known: dict[str, str],
    results: dict[str, Any],
    also: tuple[str, dict[str, Any]],
) -> dict[str, Any] | None:
    """Verify the patient, with a lookup the request needs in parallel; None once both ran."""
    identity = {"patient_id": known["patient_id"], "date_of_birth": known["date_of_birth"]}
    if "find_patient" not in results:
        return _calls(messages, ("find_patient", identity), also)
    if failed(results["find_patient"]):
        return _say(f"Sorry, I cannot find your record: {failed(results['find_patient'])}.")
    return None


def book(
    messages: list[dict[str, Any]],
    known: dict[str, str],
    specialty: str,
    results: dict[str, Any],
    replies: list[str],
) -> dict[str, Any]:
    """Book the earliest free slot (asked again after a refusal: the listing no longer has
    the slot that was taken, so it books the next)."""
    step = _verified(messages, known, results, ("list_slots", {"specialty": specialty}))
    if step is not None:
        return step
    slots = results["list_slots"]
    if not slots:
        return _say(f"There is no free {specialty} slot at the moment; I can add you to the list.")
    if "book_slot" not in results:
        arguments = {"slot_id": slots[0]["slot_id"], "email": known["email"]}
        return _calls(messages, ("book_slot", {"patient_id": known["patient_id"], **arguments}))
    problem = failed(results["book_slot"])
    if problem:
        return _say(f"Sorry, I cannot book that slot: {problem}.")
    booked = results["book_slot"]
    return _say(
        f"You're booked: {specialty} with {booked['doctor']} on {when(booked['start'])}. The "
        f"confirmation goes to {known['email']}."
    )


def change(
    kind: str,
    messages: list[dict[str, Any]],
    known: dict[str, str],
    specialty: str,
    results: dict[str, Any],
    replies: list[str],
) -> dict[str, Any]:
    """Move or cancel the patient's appointment of the specialty; asked again after the
    back end refused, hand it to the front desk."""
    verb, patient_id = VERBS[kind], known["patient_id"]
    if any(r.startswith(f"Sorry, I cannot {verb}") for r in replies):
        if "request_callback" not in results:
            reason = f"wants to {verb} the {specialty} appointment, less than 24 hours ahead"
            return _calls(
                messages, ("request_callback", {"patient_id": patient_id, "reason": reason})
            )
        return _say(
            f"I asked the front desk to phone you today about your {specialty} appointment; "
            f"they will confirm by email to {known['email']}."
        )
    step = _verified(messages, known, results, ("appointments", {"patient_id": patient_id}))
    if step is not None:
        return step
    mine = [a for a in results["appointments"] if a["specialty"] == specialty]
    if not mine:
        return _say(f"I see no {specialty} appointment under {patient_id}. Which one do you mean?")
    appointment = mine[0]
    target = {"patient_id": patient_id, "appointment_id": appointment["appointment_id"]}
    if kind == "reschedule":
        if "list_slots" not in results:
            return _calls(messages, ("list_slots", {"specialty": specialty}))
        slots = results["list_slots"]
        if not slots:
            return _say(f"There is no other free {specialty} slot at the moment.")
        target["slot_id"] = slots[0]["slot_id"]
    if kind not in results:
        return _calls(messages, (kind, {**target, "email": known["email"]}))
    problem = failed(results[kind])
    if problem:
        return _say(f"Sorry, I cannot {verb} that appointment online: {problem}.")
    if kind == "cancel":
        return _say(
            f"Your {specialty} appointment on {when(appointment['start'])} is cancelled; we "
            f"emailed {known['email']}."
        )
    moved = results["reschedule"]
    return _say(
        f"Your {specialty} appointment is moved to {when(moved['start'])} with "
        f"{moved['doctor']}. The confirmation goes to {known['email']}."
    )


ACTIONS: dict[str, Callable[..., dict[str, Any]]] = {
    "book": book,
    "reschedule": lambda *args: change("reschedule", *args),
    "cancel": lambda *args: change("cancel", *args),
}


def run_turn(
    history: list[dict[str, Any]],
    complete: Callable[[list[dict[str, Any]]], dict[str, Any]],
    call_tool: Callable[[str, dict[str, Any]], Any],
) -> str:
    """One user turn, `history` (ending with the user's message) extended in place: ask the
    model, run the tools it asks for, until it answers in text."""
    for _ in range(6):
        message = complete(history)
        history.append(message)
        if not message.get("tool_calls"):
            return message["content"]
        for call in message["tool_calls"]:
            arguments = json.loads(call["function"]["arguments"])
            result = call_tool(call["function"]["name"], arguments)
            history.append(
                {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)}
            )
    return "Sorry, I could not finish that."


def respond(conversation: list[dict[str, str]], tools: Any) -> str:
    """The same agent as a harness python agent: `tools.call` runs the domain's tools, a
    refusal (`ToolError`) becomes an error value, as the app's back end answers one."""

    def call(name: str, arguments: dict[str, Any]) -> Any:
        try:
            return tools.call(name, **arguments)
        except ToolError as exc:
            return {"error": str(exc)}

    history = [{"role": "system", "content": PROMPT}, *(dict(m) for m in conversation)]
    return run_turn(history, decide, call)


async def production_model(messages: list[Any]) -> Any:
    """The fake server's responder: the agent's model."""
    from harness.models import wire_openai

    wire = wire_openai.to_wire_messages(messages)
    return wire_openai.from_wire_messages([decide(wire)])[0]


# ----------------------------------------------------------------------------- the users

FACT_NAMES = {"patient_id": "patient id", "date_of_birth": "date of birth", "email": "email"}
STATED = {  # a fact as the first message states it
    "patient_id": ("my patient id is {}", "patient id {}", "my patient number is {}"),
    "date_of_birth": ("I was born on {}", "date of birth {}", "born {}"),
    "email": ("my email is {}", "email {}", "you can reach me at {}"),
}
ANSWERS = ("{}", "it's {}", "sure, {}", "that would be {}")
REQUESTS = {
    "book": (
        "I'd like to book a {} appointment",
        "I need a {} appointment",
        "please book me a {} appointment",
        "I want to see someone in {}",
    ),
    "reschedule": (
        "I need to move my {} appointment to another day",
        "please reschedule my {} appointment",
        "I'd like to move my {} appointment",
    ),
    "cancel": (
        "I want to cancel my {} appointment",
        "please cancel my {} appointment",
        "I need to cancel my {} appointment",
    ),
}
ASK_BACK = (
    "why do you need my {}?",
    "what do you need my {} for?",
    "is my {} really needed for this?",
    "what is my {} used for?",
)
PUSH_BACK = (
    "no, I already told you, {} it anyway",
    "no, I already gave you everything, just {} it",
    "I told you already, {} it anyway",
    "come on, {} it anyway",
)
ACCEPTS = (
    "ok, fine, thanks",
    "alright, thanks anyway",
    "ok, understood, thank you",
    "fine, thanks",
)
PIVOTS = {
    "waitlist": (
        "then please put me on the waiting list for {}",
        "in that case add me to the {} waiting list",
    ),
    "address": (
        "then please send me the clinic's address",
        "in that case just send me the clinic's address",
    ),
}
THANKS_G = ("great, thanks", "thanks", "perfect, thank you", "cool thanks")
THANKS_F = ("Thank you very much", "Wonderful, thank you", "Thanks a lot, goodbye")
GREETINGS = ("Hello", "Hi", "Good morning")
SIGN_OFFS = ("Thank you", "Thanks a lot", "Many thanks")
PRONOUN = re.compile(r"I\b")
WORD_START = re.compile(r"[^\W\d_]+\b(?!-)")  # a word, not an id such as P-1234
FILLERS = ("so", "well", "hmm", "um", "right", "basically", "honestly")
FIRST_NAMES = ("ada", "alan", "grace", "linus", "mary", "omar", "yuki", "zoe", "ines", "tariq")
LAST_NAMES = ("lovelace", "turing", "hopper", "moreno", "okafor", "sato", "berg", "novak")


class Patient:
    """A simulated patient of one population: reads each reply and writes the next message
    (None: leaves). `labels` holds what each of its turns was meant to be."""

    def __init__(
        self,
        population: str,
        rng: random.Random,
        facts: dict[str, str],
        request: str,
        specialty: str,
    ):
        self.population, self.rng, self.facts = population, rng, facts
        self.params = POPULATIONS[population]
        self.kind, self.specialty = request, specialty
        self.fillers = rng.choice((0.0, 0.2, 0.5))  # per-user style
        self.bang = rng.choice((0.0, 0.1, 0.3))
        self.lower = rng.random() < 0.3
        self.labels: list[str] = []
        self.given: list[set[str]] = []
        self.first_message = ""
        self.reacted = 0
        self.settled = False

    def styled(self, text: str, ask: bool = False) -> str:
        """The user's own noise: filler words, the odd `!`, a lower-case start."""
        if self.rng.random() < self.fillers:
            fillers = " ".join(self.rng.sample(FILLERS, self.rng.randint(1, 2)))
            lower = WORD_START.match(text) and not PRONOUN.match(text)  # never an id's case
            text = f"{fillers} {text[0].lower() + text[1:] if lower else text}"
        if not ask and self.rng.random() < self.bang:
            text += "!"
        if not WORD_START.match(text):  # it starts with a fact: as given
            return text
        return text[0].lower() + text[1:] if self.lower else text[0].upper() + text[1:]

    def said(self, text: str, label: str, facts: set[str] | None = None) -> str:
        self.labels.append(label)
        self.given.append(facts or set())
        return text

    def first(self) -> str:
        request = self.rng.choice(REQUESTS[self.kind]).format(self.specialty)
        if self.population == "F":
            kinds = list(FACT_KINDS)
            self.rng.shuffle(kinds)
            stated = ", ".join(self.rng.choice(STATED[k]).format(self.facts[k]) for k in kinds)
            text = (
                f"{self.rng.choice(GREETINGS)}, {request}. {stated[0].upper()}{stated[1:]}. "
                f"{self.rng.choice(SIGN_OFFS)}"
            )
            self.first_message = text
            return self.said(self.styled(text), "request", set(FACT_KINDS))
        kind = self.rng.choice(FACT_KINDS)
        text = f"{request}, {self.rng.choice(STATED[kind]).format(self.facts[kind])}"
        if self.rng.random() < 0.3:
            text = f"hi, {text}"
        self.first_message = text
        return self.said(self.styled(text), "request", {kind})

    def next(self, reply: str) -> str | None:
        lowered = reply.lower()
        if lowered.startswith("sorry") or "cannot" in lowered:
            self.reacted += 1
            return self.react() if self.reacted <= 2 else None
        asked = next(
            (k for k, name in FACT_NAMES.items() if "?" in reply and name in lowered), None
        )
        if asked is not None:
            if self.rng.random() < self.params["clarify"]:
                text = self.rng.choice(ASK_BACK).format(FACT_NAMES[asked])
                return self.said(self.styled(text, ask=True), "ask")
            text = self.rng.choice(ANSWERS).format(self.facts[asked])
            return self.said(self.styled(text), "answer", {asked})
        if self.settled:
            return None
        self.settled = True
        if self.rng.random() < THANKS:
            thanks = THANKS_F if self.population == "F" else THANKS_G
            return self.said(self.styled(self.rng.choice(thanks)), "thanks")
        return None

    def react(self) -> str:
        """The reaction to a refusal, drawn by the population's rates."""
        p = self.params
        reaction = self.rng.choices(
            ("pushback", "rephrase", "accept", "pivot"),
            weights=(p["pushback"], p["rephrase"], p["accept"], p["pivot"]),
        )[0]
        if reaction == "pushback":
            text = self.rng.choice(PUSH_BACK).format(VERBS[self.kind])
        elif reaction == "rephrase":  # its first request again, in its own words of the day
            text = self.first_message.removeprefix("hi, ")
        elif reaction == "accept":
            self.settled = True
            text = self.rng.choice(ACCEPTS)
        else:
            where = "address" if self.kind == "cancel" or self.rng.random() < 0.3 else "waitlist"
            text = self.rng.choice(PIVOTS[where]).format(self.specialty)
        return self.said(self.styled(text), reaction)


def session_world(rng: random.Random) -> tuple[dict[str, Any], dict[str, str], str, str]:
    """A session's clinic (its calendar and records), the patient's facts, what they want and
    the specialty: a new day at the clinic for every session."""
    first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
    patient_id = f"P-{rng.randint(1000, 9999)}"
    born = datetime(1940, 1, 1) + timedelta(days=rng.randint(0, 65 * 365))
    facts = {
        "patient_id": patient_id,
        "date_of_birth": born.strftime("%Y-%m-%d"),
        "email": f"{first}.{last}{rng.randint(1, 99)}@{rng.choice(('mailbox', 'inbox'))}.example",
    }
    kind = rng.choices(("book", "reschedule", "cancel"), weights=(2, 1, 1))[0]
    specialty = rng.choice(list(DOCTORS))
    refused = rng.random() < REFUSED
    slots: dict[str, dict[str, Any]] = {}
    for name, doctor in DOCTORS.items():
        for day in sorted(rng.sample(range(2, 14), 3)):
            start = datetime(2026, 12, 7, rng.choice((8, 9, 10, 14, 15)), 30) + timedelta(days=day)
            slots[f"S-{len(slots) + 1}"] = {
                "specialty": name,
                "doctor": doctor,
                "start": start.strftime("%Y-%m-%dT%H:%M"),
            }
    appointments = {}
    if kind == "book":
        first_free = min(
            (s for s in slots.values() if s["specialty"] == specialty), key=lambda s: s["start"]
        )
        first_free["taken_meanwhile"] = refused
    else:  # the appointment to move or cancel: tomorrow morning when it is too late online
        start = "2026-12-08T09:30" if refused else f"2026-12-{rng.randint(9, 20):02d}T11:00"
        slots["S-0"] = {
            "specialty": specialty,
            "doctor": DOCTORS[specialty],
            "start": start,
            "open": False,
        }
        appointments["A-1"] = {"patient_id": patient_id, "slot_id": "S-0", "status": "booked"}
    others = {
        f"P-{rng.randint(1000, 9999)}": {
            "name": "Other Patient",
            "date_of_birth": "1970-01-01",
            "email": "other@mailbox.example",
        }
        for _ in range(2)
    }
    patients = {
        **others,
        patient_id: {
            "name": f"{first} {last}".title(),
            "date_of_birth": facts["date_of_birth"],
            "email": facts["email"],
        },
    }
    state = ClinicState(now=NOW, patients=patients, slots=slots, appointments=appointments)
    return state.model_dump(), facts, kind, specialty


def sessions(count: int = SESSIONS, seed: int = SEED) -> list[tuple[str, str, random.Random]]:
    """(session id, population, the session's own random source) of each session."""
    draw = random.Random(seed)
    return [
        (
            f"booking-{n:03d}",
            "G" if draw.random() < POPULATIONS["G"]["share"] else "F",
            random.Random(f"{seed}:{n}"),
        )
        for n in range(count)
    ]


# ----------------------------------------------------------------------------- recording


class Backend:
    """The app's client of the clinic's booking API: a refusal comes back as a value."""

    def __init__(self, clinic: ClinicBooking | None) -> None:
        self.clinic = clinic

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        return getattr(self, name)(**arguments)

    def _run(self, name: str, **arguments: Any) -> Any:
        assert self.clinic is not None
        try:
            return getattr(self.clinic, name)(**arguments)
        except ToolError as exc:
            return {"error": str(exc)}

    def find_patient(self, patient_id: str, date_of_birth: str) -> Any:
        return self._run("find_patient", patient_id=patient_id, date_of_birth=date_of_birth)

    def list_slots(self, specialty: str) -> Any:
        return self._run("list_slots", specialty=specialty)

    def book_slot(self, patient_id: str, slot_id: str, email: str) -> Any:
        return self._run("book_slot", patient_id=patient_id, slot_id=slot_id, email=email)

    def appointments(self, patient_id: str) -> Any:
        return self._run("appointments", patient_id=patient_id)

    def reschedule(self, patient_id: str, appointment_id: str, slot_id: str, email: str) -> Any:
        return self._run(
            "reschedule",
            patient_id=patient_id,
            appointment_id=appointment_id,
            slot_id=slot_id,
            email=email,
        )

    def cancel(self, patient_id: str, appointment_id: str, email: str) -> Any:
        return self._run(
            "cancel", patient_id=patient_id, appointment_id=appointment_id, email=email
        )

    def add_to_waitlist(self, patient_id: str, specialty: str, email: str) -> Any:
        return self._run("add_to_waitlist", patient_id=patient_id, specialty=specialty, email=email)

    def request_callback(self, patient_id: str, reason: str) -> Any:
        return self._run("request_callback", patient_id=patient_id, reason=reason)


def converse(patient: Patient, reply_to: Callable[[str], str]) -> list[tuple[str, str]]:
    """A session: the patient writes, the app replies, until the patient leaves; the
    (message, reply) pairs."""
    exchanged = []
    text = patient.first()
    while text is not None:
        reply = reply_to(text)
        exchanged.append((text, reply))
        text = patient.next(reply)
    return exchanged


def feedback_of(patient: Patient, rng: random.Random) -> str | None:
    """The reaction a patient leaves on the chat: some of those whose request was refused and
    who let it go leave a 👎, some of the others a 👍."""
    if "accept" in patient.labels:
        return "👎" if rng.random() < 0.6 else None
    return "👍" if rng.random() < 0.25 else None


class Played(BaseModel):
    """A session as the simulated patient played it, with its own account of its turns."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    population: str
    exchanged: list[tuple[str, str]]
    labels: list[str]  # what each user turn was meant to be: request, answer, ask, pushback, ...
    given: list[set[str]]  # the kinds of facts each user turn gave
    feedback: str | None


def play(
    count: int,
    serve: Callable[[str, ClinicBooking], Callable[[str], str]],
    session: Callable[[str, Callable[[], list[tuple[str, str]]]], list[tuple[str, str]]],
    seed: int = SEED,
) -> dict[str, Played]:
    """The sessions, each served by `serve(session_id, clinic)` (a function from the user's
    message to the app's reply) and run by `session(session_id, run)`."""
    played = {}
    for session_id, population, rng in sessions(count, seed):
        state, facts, kind, specialty = session_world(rng)
        reply_to = serve(session_id, ClinicBooking(state))
        patient = Patient(population, rng, facts, kind, specialty)
        exchanged = session(session_id, lambda p=patient, r=reply_to: converse(p, r))
        played[session_id] = Played(
            population=population,
            exchanged=exchanged,
            labels=patient.labels,
            given=patient.given,
            feedback=feedback_of(patient, rng),
        )
    return played


def simulate(count: int = SESSIONS, seed: int = SEED) -> dict[str, Played]:
    """The sessions `record` records, played in this process without recording: the same
    patients, the same app code, `decide` called directly instead of through a model server
    (another `seed`: another sample of the same populations)."""

    def serve(session_id: str, clinic: ClinicBooking) -> Callable[[str], str]:
        backend, history = Backend(clinic), [{"role": "system", "content": PROMPT}]

        def reply_to(text: str) -> str:
            history.append({"role": "user", "content": text})
            return run_turn(history, decide, backend.call)

        return reply_to

    return play(count, serve, lambda session_id, run: run(), seed)


def record(store: Path, base_url: str, count: int = SESSIONS) -> dict[str, Played]:
    """Serve `count` sessions of the two populations through the app, recorded with
    `record_locally` into `store`."""
    import openai
    import weave

    from harness.tracing import record_locally

    tracer = record_locally(store)
    backend = Backend(None)
    tools = {name: weave.op(getattr(backend, name)) for name in ClinicBooking.tool_names()}
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="sk-test")
    histories: dict[str, list[dict[str, Any]]] = {}
    roots: dict[str, Any] = {}

    def complete(messages: list[dict[str, Any]]) -> dict[str, Any]:
        answer = client.chat.completions.create(
            model="gpt-4.1-mini", messages=messages, tools=TOOLS, temperature=0
        )
        return answer.choices[0].message.model_dump(exclude_none=True)

    @weave.op
    def handle_message(session_id: str, text: str) -> str:
        history = histories[session_id]  # the whole session, tool calls and results included
        history.append({"role": "user", "content": text})
        return run_turn(history, complete, lambda name, arguments: tools[name](**arguments))

    running: dict[str, Callable[[], list[tuple[str, str]]]] = {}  # a session to run, by id

    @weave.op
    def booking_chat(session_id: str, channel: str) -> list[list[str]]:
        return [list(pair) for pair in running.pop(session_id)()]

    def serve(session_id: str, clinic: ClinicBooking) -> Callable[[str], str]:
        backend.clinic = clinic
        histories[session_id] = [{"role": "system", "content": PROMPT}]
        return lambda text: handle_message(session_id, text)

    def session(session_id: str, run: Callable[[], list[tuple[str, str]]]) -> list:
        running[session_id] = run
        channel = "app" if int(session_id.rsplit("-", 1)[1]) % 3 == 0 else "web"
        with weave.thread(session_id):
            exchanged, roots[session_id] = booking_chat.call(session_id, channel)
        return [(text, reply) for text, reply in exchanged]

    played = play(count, serve, session)
    for session_id, done in played.items():
        if done.feedback:
            roots[session_id].feedback.add_reaction(done.feedback)
    tracer.close()
    return played


if __name__ == "__main__":
    record(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else SESSIONS)

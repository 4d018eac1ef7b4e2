"""A gadget shop's repair desk written for the tests, and its customers: three known populations
of users whose behaviour `harness personas from-traces` should recover from the app's traces,
and an agent whose words are the traps real agents set for behaviour measures.

The app, as a team might ship it:
- a back end (`RepairDesk`, also a harness domain: `@tool` methods over a state dict) that
  answers failures as values, as a REST API does: a device out of warranty (the agent refuses a
  free repair), the repair system down (`{"error": ...}`), a photo upload that fails
  (`{"status": "failed", "reason": ...}`);
- the agent's decision logic (`decide`, deterministic from the conversation), which the fake
  model server runs as the model. It needs the order number, the serial number and an email,
  asks for the first one missing, checks the order and the warranty in parallel, opens the
  repair and uploads the photo the customer attached in the web form. Its words are those of a
  real agent: it opens with "I'm sorry to hear that." when the customer describes damage (an
  apology that refuses nothing), says plainly when it cannot help ("I'm sorry, I can't open a
  free repair: ..."), escalates to a specialist when pushed, and has one bug: after a failed
  upload it still says "Done! ... your photo is attached" (a silent failure the customer never
  sees, so no error the customer reacts to);
- recorded with the real weave client (`record_locally`) and the real `openai` client, each
  model call sent the whole session so far; a `weave.thread` per session, a root op per session
  with a turn op per user message, tool ops named after the tools.

The customers (`Customer`) are policies that read each reply and answer it, drawn with a fixed
seed from `POPULATIONS` (the truth the mined personas are held to):
- T, "terse front-loaders" (50%): every fact in a short lower-case first message; after a
  refusal or an error they accept it ("ok thanks anyway") or pivot to another question;
- G, "gradual disclosers who push back" (30%): a polite first message with one of the three
  facts, one more per agent question, asking back why instead of answering in `clarify` of their
  answers; after a refusal or an error they push back or restate their request;
- I, "impatient users who abandon" (20%): two of the three facts in a short, exclamatory first
  message; after a refusal or an error they leave, half of them without a word and half with one
  ("forget it!", "ugh, I give up"), or now and then push back.
Each user also has style noise of its own (filler words, the odd `!`), and thanks the agent once
its request is settled at its population's rate.

Record: `python tests/apps/repair_desk_app.py STORE MODEL_URL [SESSIONS] [SEED]`, the model served at
MODEL_URL by a `FakeServer(responder=production_model)`. `simulate()` plays the same sessions in
process, without recording. As a python agent under test: `entry: tests.apps.repair_desk_app:respond`,
on tasks of `domain: tests.apps.repair_desk_app:RepairDesk`, whose state `session_world` draws.
"""

from __future__ import annotations

import json
import random
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.models.wire_openai import to_wire_tools  # noqa: E402
from harness.sdk import Environment, ToolError, tool  # noqa: E402

SEED = 38
SESSIONS = 240
FACT_KINDS = ("order_number", "serial_number", "email")  # what the agent needs, in this order
# The three populations' true parameters. `disclosure`: share of its three facts the first
# message gives (the rest come one per agent question); `clarify`: share of its answers to an
# agent question that ask back instead (the persona field's meaning); `pushback` ... `abandon`:
# its reactions to a refusal or error the agent reports (they sum to 1).
POPULATIONS: dict[str, dict[str, float]] = {
    "T": {
        "share": 0.5,
        "disclosure": 1.0,
        "clarify": 0.0,
        "pushback": 0.0,
        "rephrase": 0.0,
        "pivot": 0.4,
        "accept": 0.6,
        "abandon": 0.0,
    },
    "G": {
        "share": 0.3,
        "disclosure": 1 / 3,
        "clarify": 0.25,
        "pushback": 0.7,
        "rephrase": 0.3,
        "pivot": 0.0,
        "accept": 0.0,
        "abandon": 0.0,
    },
    "I": {
        "share": 0.2,
        "disclosure": 2 / 3,
        "clarify": 0.0,
        "pushback": 0.2,
        "rephrase": 0.0,
        "pivot": 0.0,
        "accept": 0.0,
        "abandon": 0.8,
    },
}
REACTIONS = ("pushback", "rephrase", "pivot", "accept", "abandon")
SILENT = 0.5  # of the abandonments: the user just leaves (else says so first)
THANKS = {"T": 0.3, "G": 0.7, "I": 0.1}  # thank the agent once the request is settled
EXPIRED = 0.45  # devices out of warranty: the agent refuses a free repair
DOWN = 0.3  # of the others: the repair system is down, the agent says it could not open one
PHOTO = 0.6  # sessions with a photo attached in the web form
UPLOAD_FAILS = 0.4  # of those uploads: failed, and the agent says "Done!" anyway (its bug)
NOW = "2026-12-07"
PROMPT = "You are the repair desk assistant of Northwind Electronics. Use the tools."
DEVICES = ("laptop", "phone", "tablet", "headphones", "smartwatch")
PROBLEMS = (  # the first four describe damage: the agent's "I'm sorry to hear that."
    "the screen cracked",
    "it broke when I dropped it",
    "it got water damage",
    "it is dead and won't turn on",
    "the battery drains in an hour",
    "the speaker crackles",
    "it keeps restarting",
)
DAMAGE = re.compile(r"\b(cracked|broke|water damage|dead)\b", re.IGNORECASE)
PRICES = {"laptop": "$149.00", "phone": "$89.00", "tablet": "$99.00"}


# ----------------------------------------------------------------------------- back end


class Order(BaseModel):
    model_config = ConfigDict(extra="forbid")
    email: str
    serial_number: str
    device: str
    warranty_until: str  # YYYY-MM-DD


class RepairState(BaseModel):
    model_config = ConfigDict(extra="forbid")
    now: str
    orders: dict[str, Order]
    repair_system_down: bool = False
    uploads_fail: bool = False
    repairs: dict[str, dict[str, str]] = {}
    photos: list[dict[str, str]] = []
    escalations: list[dict[str, str]] = []


class RepairDesk(Environment):
    """Northwind Electronics' repair desk: customers get devices repaired under warranty."""

    domain = "repair-desk"
    description = "A gadget shop's repair desk: warranty repairs of the devices it sold."
    policy = (
        "Check the order (order number and the email it was placed with) and the device's "
        "warranty before opening a repair; a device out of warranty gets a paid repair quote, "
        "never a free repair."
    )
    State = RepairState

    @tool
    def find_order(self, order_number: str, email: str) -> dict[str, Any]:
        """The order, when `email` is the one it was placed with."""
        order = self.state["orders"].get(order_number.upper())
        if order is None or order["email"] != email.lower():
            return {"error": f"no order {order_number} for that email"}
        return {"order_number": order_number.upper(), "device": order["device"]}

    @tool
    def check_warranty(self, serial_number: str) -> dict[str, Any]:
        """Whether the device with this serial number is under warranty, and until when."""
        order = self._by_serial(serial_number)
        return {"covered": order["warranty_until"] >= self.state["now"],
                "until": order["warranty_until"]}  # fmt: skip

    @tool
    def open_repair(self, order_number: str, serial_number: str, problem: str) -> dict[str, Any]:
        """Open a warranty repair; a prepaid shipping label goes to the order's email."""
        if self.state["repair_system_down"]:
            return {"error": "the repair system is unavailable"}
        self._by_serial(serial_number)
        repair_id = f"R-{1000 + len(self.state['repairs'])}"
        self.state["repairs"][repair_id] = {"order_number": order_number.upper(),
                                            "problem": problem}  # fmt: skip
        return {"repair_id": repair_id}

    @tool
    def upload_photo(self, repair_id: str, filename: str) -> dict[str, Any]:
        """Attach the customer's photo of the damage to a repair."""
        if self.state["uploads_fail"]:
            return {"status": "failed", "reason": "the file is larger than 5 MB"}
        self.state["photos"].append({"repair_id": repair_id, "filename": filename})
        return {"status": "uploaded"}

    @tool
    def escalate(self, order_number: str, reason: str) -> dict[str, Any]:
        """Hand the case to a specialist, who emails the customer within a day."""
        self.state["escalations"].append({"order_number": order_number, "reason": reason})
        return {"ticket": f"E-{len(self.state['escalations'])}"}

    @tool
    def quote_repair(self, serial_number: str) -> dict[str, Any]:
        """The price of a paid repair of the device."""
        return {"price": PRICES.get(self._by_serial(serial_number)["device"], "$59.00")}

    def _by_serial(self, serial_number: str) -> dict[str, Any]:
        for order in self.state["orders"].values():
            if order["serial_number"] == serial_number.upper():
                return order
        raise ToolError(f"no device with serial number {serial_number}")


TOOLS = to_wire_tools(RepairDesk.tool_specs())


# ----------------------------------------------------------------------------- the agent

FACT_FINDERS = {
    "order_number": re.compile(r"\bNW-\d{5}\b", re.IGNORECASE),
    "serial_number": re.compile(r"\bSN-\d{7}\b", re.IGNORECASE),
    "email": re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),
}
QUESTIONS = {
    "order_number": "What is your order number?",
    "serial_number": "What is the serial number of the device?",
    "email": "Which email did you order with?",
}
WHY = {
    "order_number": "The order number lets me find your purchase.",
    "serial_number": "The serial number tells me which device it is and its warranty.",
    "email": "I check it against the order, and the shipping label goes there.",
}
REFUSED = re.compile(r"I'm sorry, I can't|Sorry, I couldn't")  # how the agent says it cannot
CLOSING = re.compile(r"\b(thanks|thank you|thx|ok|okay|fine|understood|bye)\b", re.IGNORECASE)
LEAVING = re.compile(r"\b(forget it|give up|useless|somewhere else)\b", re.IGNORECASE)
PIVOTS = {
    "hours": "Our stores are open 9:00 to 19:00, Monday to Saturday.",
    "store": "The nearest store is at 22 Market Street.",
}
PHOTO_NOTE = re.compile(r"The customer attached (\S+)\.")


def found_facts(texts: list[str]) -> dict[str, str]:
    """The facts the agent needs that the texts give (the first of each kind), as stored."""
    found = {}
    for kind, pattern in FACT_FINDERS.items():
        match = next((m for t in texts if (m := pattern.search(t))), None)
        if match:
            found[kind] = match.group().rstrip(".")
            found[kind] = found[kind].lower() if kind == "email" else found[kind].upper()
    return found


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
    if not isinstance(result, dict):
        return None
    return result.get("error") or (
        result.get("reason") if result.get("status") == "failed" else None
    )


def decide(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The model: the next assistant message (OpenAI wire format) for the messages so far."""
    last = max(i for i, m in enumerate(messages) if m["role"] == "user")
    users = [m["content"] for m in messages if m["role"] == "user"]
    said, results = users[-1], _results(messages[last:])
    replies = [m["content"] for m in messages[:last] if m["role"] == "assistant" and m["content"]]
    known = found_facts(users)
    refused = bool(replies) and bool(REFUSED.search(replies[-1]))
    told = any(REFUSED.search(r) or re.search(r"Done!|I understand\.", r) for r in replies)
    if told:  # the outcome is known: what the customer says now is about it
        if LEAVING.search(said):
            return _say("I understand. I'm sorry for the trouble; you can write to us any time.")
        if CLOSING.search(said) and not results and "?" not in said:
            return _say("You're welcome. Take care!")
        lowered = said.lower()
        for key, answer in PIVOTS.items():
            if key in lowered:
                return _say(answer)
        if "paid repair" in lowered or "how much" in lowered:
            if "quote_repair" not in results:
                return _calls(messages, ("quote_repair", {"serial_number": known["serial_number"]}))
            price = results["quote_repair"]["price"]
            return _say(f"A paid repair costs {price}, shipping included.")
        if refused:  # pushed back or asked again: a specialist looks at it
            if "escalate" not in results:
                reason = f"customer insists after: {replies[-1][:80]}"
                return _calls(
                    messages,
                    ("escalate", {"order_number": known["order_number"], "reason": reason}),
                )
            return _say(
                f"I understand. I've passed your case to a specialist (ticket "
                f"{results['escalate']['ticket']}); they will email you at {known['email']} "
                "within a day."
            )
        return _say("Is there anything else I can do for you?")
    sorry = "I'm sorry to hear that. " if len(users) == 1 and DAMAGE.search(users[0]) else ""
    missing = next((kind for kind in FACT_KINDS if kind not in known), None)
    if missing is not None:
        if "?" in said and not found_facts([said]):  # asked why: say why, ask again
            return _say(f"{WHY[missing]} {QUESTIONS[missing]}")
        return _say(f"{sorry}{QUESTIONS[missing]}")
    return _sorry_prefixed(sorry, _outcome(messages, known, users[0], results))


def _sorry_prefixed(sorry: str, message: dict[str, Any]) -> dict[str, Any]:
    if sorry and message.get("content"):
        return {**message, "content": f"{sorry}{message['content']}"}
    return message


def _outcome(
    messages: list[dict[str, Any]], known: dict[str, str], request: str, results: dict[str, Any]
) -> dict[str, Any]:
    """Check the order and the warranty, open the repair, upload the photo: the reply."""
    if "find_order" not in results:
        return _calls(
            messages,
            ("find_order", {"order_number": known["order_number"], "email": known["email"]}),
            ("check_warranty", {"serial_number": known["serial_number"]}),
        )
    if failed(results["find_order"]):
        return _say(f"Sorry, I couldn't find your order: {failed(results['find_order'])}.")
    warranty = results["check_warranty"]
    device = results["find_order"]["device"]
    if not warranty["covered"]:
        return _say(
            f"I'm sorry, I can't open a free repair: the warranty on your {device} ended on "
            f"{warranty['until']}."
        )
    if "open_repair" not in results:
        arguments = {**{k: known[k] for k in ("order_number", "serial_number")}, "problem": request}
        return _calls(messages, ("open_repair", arguments))
    problem = failed(results["open_repair"])
    if problem:
        return _say(f"Sorry, I couldn't open the repair: {problem}. Please try again later.")
    repair_id = results["open_repair"]["repair_id"]
    note = next((m for m in messages if m["role"] == "system"), {"content": ""})["content"]
    photo = PHOTO_NOTE.search(note or "")
    if photo and "upload_photo" not in results:
        return _calls(messages, ("upload_photo", {"repair_id": repair_id, "filename": photo[1]}))
    attached = ", and your photo is attached" if photo else ""  # the bug: whatever the upload said
    return _say(
        f"Done! Repair {repair_id} is open{attached}. A prepaid shipping label is on its way to "
        f"{known['email']}."
    )


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
    return "Sorry, I couldn't finish that."


def respond(conversation: list[dict[str, str]], tools: Any) -> str:
    """The same agent as a harness python agent: `tools.call` runs the domain's tools."""

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

FACT_NAMES = {"order_number": "order number", "serial_number": "serial number", "email": "email"}
STATED = {  # a fact as a first message states it, by population style
    "T": {"order_number": "order {}", "serial_number": "serial {}", "email": "{}"},
    "G": {
        "order_number": "My order number is {}.",
        "serial_number": "The serial number is {}.",
        "email": "My email is {}.",
    },
    "I": {"order_number": "order {}", "serial_number": "SN is {}", "email": "email {}"},
}
ANSWERS = {
    "T": ("{}", "{}", "it's {}"),
    "G": ("Sure, it's {}.", "It is {}.", "Of course: {}."),
    "I": ("{}", "{}!", "it's {}, hurry up"),
}
GREETINGS = ("Hi", "Hello", "Good morning", "Hi there")
ASK_BACK = (
    "Why do you need my {}?",
    "What do you need my {} for?",
    "Is my {} really needed for this?",
)
PUSH_BACK = {
    "G": (
        "No, I already gave you everything you asked for. Please open the repair anyway.",
        "That can't be right, I bought it with a warranty. Please check again.",
        "I already told you what happened, please just repair it.",
    ),
    "I": ("come on, just fix it!", "no, fix it NOW!", "seriously? just do it!"),
}
ACCEPTS = ("ok thanks anyway", "fine, thanks", "ok understood", "ok, thanks")
PIVOTS_SAID = ("what are your store hours", "where is your nearest store", "how much is a paid repair then")  # fmt: skip
LEAVES = ("forget it!", "ugh, I give up", "forget it, this is useless", "useless. I'll go somewhere else")  # fmt: skip
THANKS_SAID = {
    "T": ("thanks", "thx", "ok thanks"),
    "G": ("Thank you very much!", "Wonderful, thank you.", "Thanks a lot, goodbye."),
    "I": ("thanks",),
}
URGENCY = ("I need it fixed TODAY!", "this is URGENT!", "FIX IT NOW!", "I need it back ASAP!")
FILLERS = ("so", "well", "um", "right", "basically", "honestly")
FIRST_NAMES = ("ada", "alan", "grace", "linus", "mary", "omar", "yuki", "zoe", "ines", "tariq")
LAST_NAMES = ("lovelace", "turing", "hopper", "moreno", "okafor", "sato", "berg", "novak")


class Customer:
    """A simulated customer of one population: reads each reply and writes the next message
    (None: leaves). `labels` holds what each of its turns was meant to be, `reactions` what it
    did after each refusal or error the agent reported (a silent leave included)."""

    def __init__(
        self, population: str, rng: random.Random, facts: dict[str, str], device: str, problem: str
    ):
        self.population, self.rng, self.facts = population, rng, facts
        self.params = POPULATIONS[population]
        self.device, self.problem = device, problem
        self.fillers = rng.choice((0.0, 0.2, 0.4))  # per-user style
        self.labels: list[str] = []
        self.given: list[set[str]] = []
        self.reactions: list[str] = []
        self.request = ""
        self.settled = False

    def styled(self, text: str) -> str:
        """The user's own noise: a filler word or two (never a fact, a question, an insisting
        word), and for the impatient an exclamation mark."""
        if self.rng.random() < self.fillers:
            lower = not re.match(r"I\b|[A-Z]+-", text)  # the pronoun and ids keep their case
            text = f"{self.rng.choice(FILLERS)} {text[0].lower() + text[1:] if lower else text}"
        if self.population == "I" and not text.endswith(("!", "?")) and self.rng.random() < 0.6:
            text += "!"
        return text

    def said(self, text: str, label: str, facts: set[str] | None = None) -> str:
        self.labels.append(label)
        self.given.append(facts or set())
        return text

    def first(self) -> str:
        kinds = list(FACT_KINDS)
        self.rng.shuffle(kinds)
        kinds = kinds[: round(self.params["disclosure"] * len(FACT_KINDS))]
        stated = [STATED[self.population][k].format(self.facts[k]) for k in kinds]
        if self.population == "T":
            self.request = f"{self.device}: {self.problem}"
            text = f"{self.request}. {', '.join(stated)}"
        elif self.population == "G":
            self.request = (
                f"there is a problem with my {self.device}, {self.problem}, and I'd like it "
                "repaired under the warranty"
            )
            text = f"{self.rng.choice(GREETINGS)}, {self.request}. {' '.join(stated)}"
        else:
            self.request = f"my {self.device} {self.problem}"
            urgency = self.rng.choice(URGENCY)
            text = f"{self.request}!! {urgency} {', '.join(stated)}"
        return self.said(self.styled(text), "request", set(kinds))

    def next(self, reply: str) -> str | None:
        if REFUSED.search(reply) and not self.reactions:
            return self.react()
        asked = next((k for k, name in FACT_NAMES.items() if "?" in reply and name in reply), None)
        if asked is not None and not self.settled:
            if self.rng.random() < self.params["clarify"]:
                text = self.rng.choice(ASK_BACK).format(FACT_NAMES[asked])
                return self.said(text, "ask")
            text = self.rng.choice(ANSWERS[self.population]).format(self.facts[asked])
            return self.said(self.styled(text), "answer", {asked})
        if self.settled:
            return None
        self.settled = True
        if self.rng.random() < THANKS[self.population]:
            return self.said(self.rng.choice(THANKS_SAID[self.population]), "thanks")
        return None

    def react(self) -> str | None:
        """The reaction to a refusal or error, drawn by the population's rates."""
        p = self.params
        reaction = self.rng.choices(REACTIONS, weights=[p[r] for r in REACTIONS])[0]
        self.reactions.append(reaction)
        if reaction == "abandon":
            self.settled = True
            if self.rng.random() < SILENT:
                return None
            return self.said(self.rng.choice(LEAVES), "abandon")
        if reaction == "pushback":
            text = self.rng.choice(PUSH_BACK[self.population])
        elif reaction == "rephrase":  # its request again, in the words of its first message
            text = f"{self.request[0].upper()}{self.request[1:]}, please."
        elif reaction == "accept":
            self.settled = True
            text = self.rng.choice(ACCEPTS)
        else:
            text = self.rng.choice(PIVOTS_SAID)
        return self.said(self.styled(text), reaction)


def session_world(
    rng: random.Random,
) -> tuple[dict[str, Any], dict[str, str], str, str, str | None]:
    """A session's shop (the customer's order among others, today's back end), the customer's
    facts, the device, its problem, and the photo attached in the web form (None: none)."""
    first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
    device, problem = rng.choice(DEVICES), rng.choice(PROBLEMS)
    facts = {
        "order_number": f"NW-{rng.randint(10000, 99999)}",
        "serial_number": f"SN-{rng.randint(1000000, 9999999)}",
        "email": f"{first}.{last}{rng.randint(1, 99)}@{rng.choice(('mailbox', 'inbox'))}.example",
    }
    expired = rng.random() < EXPIRED
    until = f"2026-{rng.randint(1, 11):02d}-15" if expired else f"2027-{rng.randint(1, 12):02d}-15"
    orders = {
        facts["order_number"]: Order(
            email=facts["email"],
            serial_number=facts["serial_number"],
            device=device,
            warranty_until=until,
        ),
        f"NW-{rng.randint(10000, 99999)}": Order(
            email="someone@else.example",
            serial_number=f"SN-{rng.randint(1000000, 9999999)}",
            device=rng.choice(DEVICES),
            warranty_until="2027-06-30",
        ),
    }
    down = rng.random() < DOWN
    photo = f"photo-{rng.randint(100, 999)}.jpeg" if rng.random() < PHOTO else None
    state = RepairState(
        now=NOW,
        orders=orders,
        repair_system_down=down,
        uploads_fail=rng.random() < UPLOAD_FAILS,
    )
    return state.model_dump(), facts, device, problem, photo


def sessions(count: int = SESSIONS, seed: int = SEED) -> list[tuple[str, str, random.Random]]:
    """(session id, population, the session's own random source) of each session."""
    draw = random.Random(seed)
    names, weights = list(POPULATIONS), [p["share"] for p in POPULATIONS.values()]
    return [
        (f"repair-{n:03d}", draw.choices(names, weights)[0], random.Random(f"{seed}:{n}"))
        for n in range(count)
    ]


# ----------------------------------------------------------------------------- recording


class Backend:
    """The app's client of the repair API: every failure comes back as a value."""

    def __init__(self, desk: RepairDesk | None) -> None:
        self.desk = desk

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        return getattr(self, name)(**arguments)

    def _run(self, name: str, **arguments: Any) -> Any:
        assert self.desk is not None
        try:
            return getattr(self.desk, name)(**arguments)
        except ToolError as exc:
            return {"error": str(exc)}

    def find_order(self, order_number: str, email: str) -> Any:
        return self._run("find_order", order_number=order_number, email=email)

    def check_warranty(self, serial_number: str) -> Any:
        return self._run("check_warranty", serial_number=serial_number)

    def open_repair(self, order_number: str, serial_number: str, problem: str) -> Any:
        return self._run(
            "open_repair", order_number=order_number, serial_number=serial_number, problem=problem
        )

    def upload_photo(self, repair_id: str, filename: str) -> Any:
        return self._run("upload_photo", repair_id=repair_id, filename=filename)

    def escalate(self, order_number: str, reason: str) -> Any:
        return self._run("escalate", order_number=order_number, reason=reason)

    def quote_repair(self, serial_number: str) -> Any:
        return self._run("quote_repair", serial_number=serial_number)


def prompt_of(photo: str | None) -> str:
    return f"{PROMPT} The customer attached {photo}." if photo else PROMPT


def converse(customer: Customer, reply_to: Callable[[str], str]) -> list[tuple[str, str]]:
    """A session: the customer writes, the app replies, until the customer leaves; the
    (message, reply) pairs."""
    exchanged = []
    text = customer.first()
    while text is not None:
        reply = reply_to(text)
        exchanged.append((text, reply))
        text = customer.next(reply)
    return exchanged


class Played(BaseModel):
    """A session as the simulated customer played it, with its own account of its turns."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    population: str
    exchanged: list[tuple[str, str]]
    labels: list[str]  # what each user turn was meant to be: request, answer, ask, pushback, ...
    given: list[set[str]]  # the kinds of facts each user turn gave
    reactions: list[str]  # what it did after each refusal or error it was told of
    tool_failures: list[str]  # the back end's failures in the session, seen or not


def play(
    count: int,
    serve: Callable[[str, RepairDesk, str | None], Callable[[str], str]],
    session: Callable[[str, Callable[[], list[tuple[str, str]]]], list[tuple[str, str]]],
    seed: int = SEED,
) -> dict[str, Played]:
    """The sessions, each served by `serve(session_id, desk, photo)` (a function from the
    user's message to the app's reply) and run by `session(session_id, run)`."""
    played = {}
    for session_id, population, rng in sessions(count, seed):
        state, facts, device, problem, photo = session_world(rng)
        desk = RepairDesk(state)
        reply_to = serve(session_id, desk, photo)
        customer = Customer(population, rng, facts, device, problem)
        exchanged = session(session_id, lambda c=customer, r=reply_to: converse(c, r))
        failures = ["upload_photo"] if state["uploads_fail"] and desk.state["repairs"] else []
        failures = failures if photo else []
        if state["repair_system_down"] and any("couldn't open" in r for _, r in exchanged):
            failures.append("open_repair")
        played[session_id] = Played(
            population=population,
            exchanged=exchanged,
            labels=customer.labels,
            given=customer.given,
            reactions=customer.reactions,
            tool_failures=failures,
        )
    return played


def simulate(count: int = SESSIONS, seed: int = SEED) -> dict[str, Played]:
    """The sessions `record` records, played in this process without recording: the same
    customers, the same app code, `decide` called directly instead of through a model server
    (another `seed`: another sample of the same populations)."""

    def serve(session_id: str, desk: RepairDesk, photo: str | None) -> Callable[[str], str]:
        backend, history = Backend(desk), [{"role": "system", "content": prompt_of(photo)}]

        def reply_to(text: str) -> str:
            history.append({"role": "user", "content": text})
            return run_turn(history, decide, backend.call)

        return reply_to

    return play(count, serve, lambda session_id, run: run(), seed)


def record(
    store: Path, base_url: str, count: int = SESSIONS, seed: int = SEED
) -> dict[str, Played]:
    """Serve `count` sessions of the three populations through the app, recorded with
    `record_locally` into `store`."""
    import openai
    import weave

    from harness.tracing import record_locally

    tracer = record_locally(store)
    backend = Backend(None)
    tools = {name: weave.op(getattr(backend, name)) for name in RepairDesk.tool_names()}
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="sk-test")
    histories: dict[str, list[dict[str, Any]]] = {}

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
    def repair_chat(session_id: str, channel: str) -> list[list[str]]:
        return [list(pair) for pair in running.pop(session_id)()]

    def serve(session_id: str, desk: RepairDesk, photo: str | None) -> Callable[[str], str]:
        backend.desk = desk
        histories[session_id] = [{"role": "system", "content": prompt_of(photo)}]
        return lambda text: handle_message(session_id, text)

    def session(session_id: str, run: Callable[[], list[tuple[str, str]]]) -> list:
        running[session_id] = run
        channel = "app" if int(session_id.rsplit("-", 1)[1]) % 3 == 0 else "web"
        with weave.thread(session_id):
            exchanged = repair_chat(session_id, channel)
        return [(text, reply) for text, reply in exchanged]

    played = play(count, serve, session, seed)
    tracer.close()
    return played


if __name__ == "__main__":
    arguments = sys.argv[1:]
    record(
        Path(arguments[0]),
        arguments[1],
        int(arguments[2]) if len(arguments) > 2 else SESSIONS,
        int(arguments[3]) if len(arguments) > 3 else SEED,
    )

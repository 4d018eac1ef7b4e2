"""A ferry ticket desk, written as a newcomer writes a project of their own (no support-desk,
library or pharmacy words): a domain module with a pydantic `State` holding defaulted and
Literal fields, tools with Literal parameters, a python agent, a persona, tasks over two levels
and a gate. Tests copy it into a folder and then break one thing, the way a stranger would, to
see what harness says.

`write_ferry_project(root)` writes the files and returns `root`; `FILES` holds their text so a
test can replace one (`write_ferry_project(root, {"ferry.py": broken})`).
"""

from __future__ import annotations

from pathlib import Path

DOMAIN = '''"""A ferry line's ticket desk: travellers book crossings, with or without a vehicle."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from harness.sdk import Environment, ToolError, register_domain, tool


class Sailing(BaseModel):
    model_config = ConfigDict(extra="forbid")

    route: str
    departs: str
    seats: int
    car_spaces: int = 0


class Ticket(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sailing_id: str
    traveller: str
    vehicle: Literal["none", "car", "bicycle"] = "none"


class FerryState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sailings: dict[str, Sailing]
    tickets: list[Ticket] = []
    season: Literal["summer", "winter"] = "summer"


@register_domain
class FerryDesk(Environment):
    """Crossings between the mainland and two islands."""

    domain = "ferry"
    description = "A ferry line's ticket desk: travellers book crossings."
    policy = "Book a car only on a sailing with a free car space."
    State = FerryState

    @tool
    def find_sailings(self, route: str) -> list[dict[str, Any]]:
        """Sailings on a route (for example "mainland-north"), with their free seats."""
        return [
            {"sailing_id": key, **sailing}
            for key, sailing in self.state["sailings"].items()
            if sailing["route"] == route
        ]

    @tool
    def book_ticket(
        self, sailing_id: str, traveller: str, vehicle: Literal["none", "car", "bicycle"] = "none"
    ) -> dict[str, Any]:
        """Book one traveller on a sailing, with a vehicle or none."""
        sailing = self.state["sailings"].get(sailing_id)
        if sailing is None:
            raise ToolError(f"no sailing {sailing_id}")
        if sailing["seats"] < 1:
            raise ToolError(f"{sailing_id} is full")
        if vehicle == "car" and sailing["car_spaces"] < 1:
            raise ToolError(f"{sailing_id} has no car space left")
        sailing["seats"] -= 1
        if vehicle == "car":
            sailing["car_spaces"] -= 1
        ticket = {"sailing_id": sailing_id, "traveller": traveller, "vehicle": vehicle}
        self.state["tickets"].append(ticket)
        return ticket
'''

AGENT = '''"""The ferry desk's agent: books the first sailing of the route the traveller names."""

from __future__ import annotations

import re
from typing import Any

from harness.sdk import ToolError

ROUTE = re.compile(r"\\bmainland-(north|south)\\b")
NAME = re.compile(r"\\bI am ([A-Z][a-z]+)")


def respond(conversation: list[dict[str, str]], tools: Any) -> str:
    said = " ".join(m["content"] for m in conversation if m["role"] == "user")
    route, name = ROUTE.search(said), NAME.search(said)
    if route is None or name is None:
        return "Which route, and who is travelling? Anything else?"
    vehicle = "car" if "car" in said else "none"
    sailings = tools.call("find_sailings", route=route.group(0))
    if not sailings:
        return f"There is no sailing on {route.group(0)}. Anything else?"
    try:
        ticket = tools.call(
            "book_ticket", sailing_id=sailings[0]["sailing_id"], traveller=name.group(1),
            vehicle=vehicle,
        )
    except ToolError as refusal:
        return f"Sorry, I could not book it: {refusal}. Anything else?"
    return f"Booked {ticket['traveller']} on {ticket['sailing_id']}. Anything else?"
'''

FILES: dict[str, str] = {
    "harness.yaml": "plugins: [ferry.py]\n",
    "ferry.py": DOMAIN,
    "agent.py": AGENT,
    "agents/desk.yaml": (
        "kind: agent\nname: desk\nrunner: python\nentry: ../agent.py:respond\n"
        "tools: [find_sailings, book_ticket]\n"
    ),
    "personas/traveller.yaml": (
        "kind: persona\nname: traveller\ndescription: A traveller who knows the route.\n"
        "model: scripted\nscripted_turns:\n"
        "  - when: {matches: \"(?i)anything else\"}\n"
        "    reply: \"No, thanks. ###STOP###\"\n"
        "  - reply: \"I am {known.name}, mainland-north please. ###STOP###\"\n"
    ),
    "tasks/data/sailings.json": (
        '{"sailings": {"S-1": {"route": "mainland-north", "departs": "08:00", "seats": 2,'
        ' "car_spaces": 1}, "S-2": {"route": "mainland-south", "departs": "09:30", "seats": 0}}}\n'
    ),
    "tasks/book-foot.yaml": (
        "kind: task\nid: book-foot\ntitle: Book a crossing on foot\nlevel: 1\ndomain: ferry\npersona: traveller\n"
        "scenario:\n  reason: You want to cross to the north island on foot.\n"
        "  known_info: {name: Ada}\n"
        "start:\n  state_file: data/sailings.json\n"
        "  first_message: I am Ada, one ticket on mainland-north please.\n"
        "end: {max_turns: 4}\n"
        "checks:\n"
        "  - kind: tool_called\n    tool: book_ticket\n"
        "    args: {sailing_id: S-1, traveller: Ada, vehicle: none}\n"
        "  - kind: state\n    path: \"$.sailings['S-1'].seats\"\n    equals: 1\n"
    ),
    "tasks/book-car.yaml": (
        "kind: task\nid: book-car\ntitle: Book a crossing with a car\nlevel: 1\ndomain: ferry\npersona: traveller\n"
        "scenario:\n  reason: You drive to the north island.\n  known_info: {name: Bo}\n"
        "start:\n  state_file: data/sailings.json\n"
        "  first_message: I am Bo, with my car, mainland-north please.\n"
        "end: {max_turns: 4}\n"
        "checks:\n"
        "  - kind: tool_called\n    tool: book_ticket\n    args: {vehicle: car}\n"
        "  - kind: state\n    path: \"$.sailings['S-1'].car_spaces\"\n    equals: 0\n"
    ),
    "tasks/full-sailing.yaml": (
        "kind: task\nid: full-sailing\ntitle: Say the south crossing is full\nlevel: 2\ndomain: ferry\npersona: traveller\n"
        "tags: [regression]\n"
        "scenario:\n  reason: You want the south crossing, which is full.\n"
        "  known_info: {name: Cy}\n"
        "start:\n  state_file: data/sailings.json\n"
        "  first_message: I am Cy, mainland-south please.\n"
        "end: {max_turns: 4}\n"
        "checks:\n"
        "  - kind: no_false_success\n"
        "  - kind: state\n    path: \"$.tickets\"\n    equals: []\n"
    ),
    "ci/gate.yaml": "kind: gate\nalpha: 0.05\nmin_tasks: 2\nregression_tags: [regression]\n",
}


def write_ferry_project(root: Path, replace: dict[str, str] | None = None) -> Path:
    """The ferry project in `root`, with the files of `replace` written instead of (or beside)
    the bundled ones; returns `root`."""
    for name, text in {**FILES, **(replace or {})}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root

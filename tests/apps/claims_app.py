"""A home-insurance claims assistant written for the tests: the real `anthropic` client (the
messages API with tool use) against the project's fake server, recorded with the real weave
through `record_locally`. Its shape is unlike the OpenAI apps the converter was first written
against (tests/apps/support_app.py, tests/apps/helpdesk_app.py, tests/apps/clinic_booking_app.py):

- one root op per chat session (`chat_session`, in a `weave.thread`) with a turn op per user
  message below it (`handle_turn`, whose inputs are the session id, the channel and the user's
  text, not a message list);
- the app keeps the whole Anthropic history (tool_use and tool_result blocks) and re-sends it
  every turn; a non-streamed reply's `content` goes back as the SDK's own block objects, so
  weave records them as objects (`ObjectRecord`s) in the next call's inputs;
- the web channel streams: `client.messages.create(stream=True)`, the text and the tool calls
  put together from the events as SDK users do (weave 0.54 records such a reply's text only,
  without its `tool_use` blocks); the mobile channel does not stream. `record(...,
  streaming="text")` streams the web channel through `client.messages.stream(...)` and its
  `text_stream`, as a chat UI that prints the text as it arrives (weave then records `""`);
- tools as ops: `file_claim`, `upload_document` (returns `{"status": "failed", "reason": ...}`
  for a file type it refuses or a file that is too large), `lookup_claim` (raises
  `ClaimNotFound` when a customer mistypes a claim number; the app hands the error to the model
  as an `is_error` tool result, and the model asks the customer to check the number);
- several documents uploaded at once: the model asks for one `upload_document` per file in one
  reply, and the app runs them on a thread pool;
- a coverage sub-step with its own model call and its own system prompt: `file_claim` asks a
  model (`explain_coverage`, streamed with `client.messages.stream(...).get_final_message()`)
  what the chosen coverage pays for, and returns it with the new claim;
- feedback through the weave client on the turn calls (👎, 👍, notes) and on a session's root.

Production has two bugs, which `respond_fixed` fixes:
1. water that escaped inside the home (a burst pipe, a leak, an appliance that overflowed) is
   filed under `flood`, which covers water rising from outside; it is `water_damage`;
2. it never reads what an upload returned and says "Done! I uploaded X" after a failed upload.

`respond` (production) and `respond_fixed` are the app's logic as python agents under test
(`runner: python`, `entry: tests/apps/claims_app.py:respond`): the same model decisions (`decide`)
on the visible conversation, calling the task's tools. `respond_by_prompt` is production's code
following its variant's prompt, as a model would (both fixes are policy lines a prompt can state:
`WATER_POLICY`, `READS_POLICY`), for `harness climb`.

Record: `python tests/apps/claims_app.py STORE MODEL_URL [events|text] [COUNT]`, the model served at
MODEL_URL by a `FakeServer(responder=production_model)`. Everything is deterministic: the sessions run in
order, claim numbers count up from CLM-5001, document ids are derived from claim and file name.
"""

from __future__ import annotations

import copy
import json
import re
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MODEL, SMALL_MODEL = "claude-sonnet-4-5", "claude-haiku-4-5"
MAIN_PROMPT = (
    "You are the claims assistant of Hearth & Home Insurance. Help policyholders file "
    "home-insurance claims, add documents to a claim and check a claim's status. Use the tools."
)
COVERAGE_PROMPT = "You explain a home-insurance coverage to a policyholder in one sentence."
WATER_POLICY = (
    "A burst pipe, a leak or an appliance that overflowed inside the home is water_damage; "
    "flood is only water rising from outside"
)
READS_POLICY = "Read every tool result before telling the user a step worked"
COVERAGES = ["water_damage", "flood", "fire", "theft", "storm", "other"]
COVERS = {  # what the coverage sub-step's model says each coverage pays for
    "water_damage": "Water damage coverage pays for sudden leaks and bursts inside your home.",
    "flood": "Flood coverage pays for damage from water rising from outside, such as a river.",
    "fire": "Fire coverage pays for damage from fire and smoke.",
    "theft": "Theft coverage pays for belongings stolen from your home.",
    "storm": "Storm coverage pays for damage from wind, hail and falling trees.",
    "other": "Your adjuster will tell you which part of your policy applies.",
}
POLICIES = ["HP-20417", "HP-31552", "HP-40988", "HP-52210", "HP-63301"]
CLAIMS: dict[str, dict[str, Any]] = {
    "CLM-4102": {"policy": "HP-20417", "coverage": "fire", "status": "under review"},
    "CLM-4117": {"policy": "HP-31552", "coverage": "storm", "status": "approved", "payout": 3200},
    "CLM-4130": {"policy": "HP-40988", "coverage": "theft", "status": "waiting for documents"},
    "CLM-4144": {"policy": "HP-52210", "coverage": "water_damage", "status": "closed"},
}
ADJUSTER = "M. Okafor"
REFUSED_TYPES = (".heic",)
LARGE = ("video", ".mov", ".mp4")  # files over the upload limit

# Each session: the customer's messages, in order. Sessions alternate between the web channel
# (even positions: streamed) and the mobile channel (odd positions: not streamed).
SESSIONS: dict[str, list[str]] = {
    # water inside the home: production files it under flood (bug 1)
    "water-kitchen": [
        "A pipe burst under my kitchen sink and soaked the floor. Policy HP-20417, it "
        "happened on 2026-03-02."
    ],
    "water-bathroom": [
        "The bathroom upstairs leaked through the ceiling. I want to file a claim.",
        "Policy HP-31552, it started on 2026-03-04.",
    ],
    "water-heater": ["My water heater burst in the basement on 2026-02-27, policy HP-40988."],
    "water-dishwasher": [
        "Dishwasher overflowed and ruined the kitchen floor. HP-52210, happened 2026-03-01."
    ],
    "water-washer": [
        "washing machine hose split, water everywhere in the laundry room. policy HP-63301 "
        "date 2026-03-03"
    ],
    "water-toilet": [
        "The toilet overflowed overnight and damaged the hallway floor, policy HP-20417, "
        "2026-03-05.",
        "Why flood? Nothing flooded outside.",
    ],
    "water-radiator": [
        "A radiator pipe leaked into the living room. Policy HP-31552, on 2026-02-24."
    ],
    "water-fridge": [
        "I need to file a claim.",
        "The fridge water line leaked under the floorboards.",
        "HP-40988, 2026-02-22",
    ],
    "water-sprinkler": [
        "Our indoor sprinkler pipe burst in the hallway on 2026-02-19. Policy HP-52210."
    ],
    "water-aquarium": ["The aquarium cracked and leaked into the carpet, HP-63301, 2026-02-18."],
    # water rising from outside: flood is right
    "flood-river": [
        "The river overflowed and water came into our ground floor on 2026-02-20. Policy HP-31552."
    ],
    "flood-street": ["Rising water from the street flooded the garage, 2026-02-21, HP-40988."],
    # other damage, filed right
    "fire-kitchen": ["A grease fire damaged my kitchen on 2026-03-01. Policy HP-52210."],
    "theft-bike": ["Someone stole my bike from the garage on 2026-02-28. HP-63301."],
    "storm-roof": ["The storm last night tore shingles off the roof. Policy HP-20417, 2026-03-04."],
    "storm-tree": ["A tree fell on our fence during the windstorm on 2026-02-25, policy HP-31552"],
    "fire-garage": [
        "I need to file a claim, there was a fire in the garage.",
        "HP-40988",
        "It was on 2026-02-26.",
    ],
    "theft-laptop": ["My laptop was stolen in a break-in on 2026-03-03. Policy HP-52210."],
    "storm-hail": ["Hail smashed two skylights on 2026-02-23, policy HP-63301."],
    # documents: production says "Done!" whatever the upload returned (bug 2)
    "upload-heic": ["Please add photo kitchen.heic to claim CLM-4102."],
    "upload-two-ok": ["Add receipt.pdf and photo1.jpg to claim CLM-4130"],
    "upload-video": ["Upload damage1.jpg and walkthrough_video.mov to CLM-4117"],
    "upload-roof-heic": ["can you attach roof.heic to CLM-4144"],
    "upload-invoice": ["Attach invoice.pdf to claim CLM-4102 please"],
    "upload-thanks": ["Attach basement.heic to CLM-4130", "thanks"],
    "upload-scan": ["Could you add scan.png to CLM-4130?"],
    "upload-three": ["Please add front.jpg, back.jpg and side.heic to CLM-4117."],
    # a claim filed, then documents added to it in a later turn
    "storm-window-upload": [
        "A tree branch broke my window in the storm on 2026-03-03. Policy HP-52210.",
        "Great. Please add window.jpg and window2.heic to that claim.",
    ],
    "theft-shed-upload": [
        "Someone broke into my shed and stole my tools on 2026-03-02, policy HP-63301",
        "Add shed.jpg to the claim",
    ],
    "water-wall-upload": [
        "A pipe leaked behind the wall in my bathroom, policy HP-40988, 2026-03-05.",
        "Here are photos: wall1.jpg and wall2.heic",
    ],
    # status, with claim numbers the customer mistypes (ClaimNotFound)
    "status-review": ["What's the status of claim CLM-4102?"],
    "status-typo": ["status of my claim CLM-41O2?", "Sorry, it's CLM-4102"],
    "status-swapped": ["Has claim CLM-4711 been paid?", "Oops, I meant CLM-4117"],
    "status-paid": ["Has claim CLM-4117 been paid yet?"],
    "status-waiting": ["What's happening with CLM-4130?"],
    "status-closed": ["Is CLM-4144 still open?"],
    "status-abandon": ["where is my claim CLM-4O30", "Forget it."],
    "status-greeting": ["Hi", "I want to check claim CLM-4130", "thanks"],
    "status-typo-twice": ["check CLM-1430 please", "CLM-4310?", "CLM-4130, sorry"],
}
# session: [(turn index, reaction or None, note or None)]; a turn's call gets the feedback, or
# the session's root for turn index None
FEEDBACK: dict[str, list[tuple[int | None, str | None, str | None]]] = {
    "water-kitchen": [(0, "👎", "A burst pipe is water damage, not flood. Wrong coverage.")],
    "water-bathroom": [(1, "👎", "Should be filed as water_damage, the leak was inside.")],
    "water-heater": [(0, "👎", None)],
    "water-washer": [(0, "👎", "Wrong coverage: flood is for rising water, not a split hose.")],
    "water-toilet": [(1, "👎", "Customer had to ask why flood. It is water_damage.")],
    "water-radiator": [(0, "👎", "coverage should be water damage")],
    "water-sprinkler": [(None, "👎", None)],
    "flood-river": [(0, "👍", None)],
    "fire-kitchen": [(0, "👍", "Quick and easy, thanks!")],
    "theft-bike": [(0, "👍", None)],
    "storm-tree": [(0, "👍", None)],
    "fire-garage": [(2, "👍", None)],
    "upload-heic": [(0, "👎", "It said uploaded but the adjuster never got the photo.")],
    "upload-two-ok": [(0, "👍", None)],
    "upload-video": [(0, "👎", "The video was never uploaded, but the bot said Done.")],
    "upload-three": [(0, "👎", None)],
    "storm-window-upload": [(1, "👎", "window2.heic is missing from the claim.")],
    "theft-shed-upload": [(1, "👍", "Easy!")],
    "water-wall-upload": [(0, "👎", "Filed as flood, should be water_damage."), (1, "👎", None)],
    "status-review": [(0, "👍", None)],
    "status-typo": [(1, "👍", None)],
    "status-paid": [(0, "👍", "Great, clear answer.")],
}

DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
POLICY = re.compile(r"\bHP-\d{5}\b")
CLAIM = re.compile(r"\bCLM-[0-9A-Z]{4}\b", re.IGNORECASE)
FILE = re.compile(r"\b[\w-]+\.(?:jpe?g|png|pdf|heic|mov|mp4)\b", re.IGNORECASE)
DAMAGE = re.compile(
    r"\b(pipe|leak\w*|burst|overflow\w*|water|flood\w*|fire|smoke|stole\w*|theft|break-in|"
    r"broke|storm|hail|tree|wind\w*|damage\w*|cracked)\b",
    re.IGNORECASE,
)
ASK_BOTH = "I can file that. What is your policy number, and on what date did it happen?"
ASK_WHAT = "I can file a claim for you. What happened?"
ASK_POLICY = "What is your policy number?"
ASK_DATE = "On what date did it happen?"
ASKS = (ASK_BOTH, ASK_WHAT, ASK_POLICY, ASK_DATE)
HELP = "Hello! I can file a claim, add documents to a claim, or check a claim's status."


def _tool(name: str, what: str, /, **properties: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": what,
        "input_schema": {"type": "object", "properties": properties, "required": list(properties)},
    }


STRING = {"type": "string"}
TOOLS = [
    _tool("lookup_claim", "A claim's status, coverage and adjuster.", claim_number=STRING),
    _tool(
        "file_claim",
        "File a new claim under one coverage of the policy.",
        policy_number=STRING,
        coverage={"type": "string", "enum": COVERAGES},
        description=STRING,
        incident_date={"type": "string", "description": "YYYY-MM-DD"},
    ),
    _tool(
        "upload_document",
        "Attach a photo, receipt or report to a claim.",
        claim_number=STRING,
        filename=STRING,
    ),
]


class ClaimNotFound(Exception):
    """No claim has that number."""


class Backend:
    """The claims system. `explain` is the coverage sub-step (a model call) that `file_claim`
    asks what the claim's coverage pays for."""

    def __init__(self, explain: Callable[[str], str]) -> None:
        self.claims = copy.deepcopy(CLAIMS)
        self.explain = explain
        self.next_number = 5001

    def lookup_claim(self, claim_number: str) -> dict[str, Any]:
        claim = self.claims.get(claim_number.upper())
        if claim is None:
            raise ClaimNotFound(f"no claim {claim_number}")
        return {"claim_number": claim_number.upper(), "adjuster": ADJUSTER, **claim}

    def file_claim(
        self, policy_number: str, coverage: str, description: str, incident_date: str
    ) -> dict[str, Any]:
        number = f"CLM-{self.next_number}"
        self.next_number += 1
        self.claims[number] = {"policy": policy_number, "coverage": coverage, "status": "open"}
        covers = self.explain(coverage)
        return {"claim_number": number, "status": "open", "coverage": coverage, "covers": covers}

    def upload_document(self, claim_number: str, filename: str) -> dict[str, Any]:
        lowered = filename.lower()
        if lowered.endswith(REFUSED_TYPES):
            return {"status": "failed", "reason": f"unsupported file type {Path(lowered).suffix}"}
        if any(mark in lowered for mark in LARGE):
            return {"status": "failed", "reason": "file larger than the 10 MB limit"}
        if claim_number.upper() not in self.claims:
            return {"status": "failed", "reason": f"no claim {claim_number}"}
        digest = zlib.crc32(f"{claim_number}/{filename}".encode()) % 9000 + 1000
        return {"status": "uploaded", "document_id": f"DOC-{digest}", "filename": filename}


# ---------------------------------------------------------------- the model


@dataclass(frozen=True)
class Policy:
    """What the model knows: `water`, that water escaping inside the home is `water_damage`
    (bug 1 fixed); `reads`, to read tool results before saying a step worked (bug 2 fixed)."""

    water: bool
    reads: bool

    @classmethod
    def of_prompt(cls, prompt: str) -> Policy:
        lowered = prompt.lower()
        return cls(WATER_POLICY.lower() in lowered, READS_POLICY.lower() in lowered)


PRODUCTION, FIXED = Policy(water=False, reads=False), Policy(water=True, reads=True)


def coverage_of(description: str, water_inside: bool) -> str:
    """The coverage a description of damage falls under, as the model reads it."""
    text = description.lower()
    if re.search(r"\b(fire|smoke|burn\w*)\b", text):
        return "fire"
    if re.search(r"\b(stole\w*|theft|break-in|broke into|burglar\w*)\b", text):
        return "theft"
    if re.search(r"\b(river|rising water|street|storm surge)\b", text):
        return "flood"
    if re.search(r"\b(storm|wind\w*|hail|tree|lightning)\b", text):
        return "storm"
    if re.search(r"\b(pipe|leak\w*|burst|overflow\w*|water|hose|cracked)\b", text):
        return "water_damage" if water_inside else "flood"  # bug 1
    return "other"


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "input": arguments}


def _ids(messages: list[dict[str, Any]], calls: list[dict[str, Any]]) -> dict[str, Any]:
    """An assistant message asking for `calls`, with ids unique in the conversation."""
    said = sum(1 for m in messages if m["role"] == "assistant")
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": f"toolu_{said:02d}_{i}", **c} for i, c in enumerate(calls)],
    }


def _say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text, "tool_calls": []}


def _results(messages: list[dict[str, Any]], start: int) -> list[tuple[str, dict, Any, bool]]:
    """The tool calls since `start` with their results: (tool, arguments, result, is_error)."""
    asked = {
        c["id"]: c for m in messages[start:] if m["role"] == "assistant" for c in m["tool_calls"]
    }
    done = []
    for message in messages[start:]:
        if message["role"] == "tool" and message["tool_call_id"] in asked:
            call = asked[message["tool_call_id"]]
            try:
                result = json.loads(message["content"])
            except ValueError:
                result = message["content"]
            done.append((call["name"], call["input"], result, bool(message.get("is_error"))))
    return done


def _filed(messages: list[dict[str, Any]]) -> tuple[str, str] | None:
    """The claim filed earlier in the conversation and its coverage, from the tool result or
    from what the assistant told the user (an agent that sees only the visible conversation)."""
    for message in reversed(messages):
        if message["role"] == "tool":
            try:
                result = json.loads(message["content"])
            except ValueError:
                continue
            if isinstance(result, dict) and "covers" in result:
                return result["claim_number"], result["coverage"]
        if message["role"] == "assistant":
            found = re.search(r"I filed claim (CLM-\d+) under (\w+) coverage", message["content"])
            if found:
                return found.group(1), found.group(2)
    return None


def decide(messages: list[dict[str, Any]], policy: Policy) -> dict[str, Any]:
    """The main model: the next assistant message, given the conversation as
    `{"role": "user" | "assistant" | "tool", "content": str, "tool_calls": [{"id", "name",
    "input"}], "tool_call_id", "is_error"}` dicts (no system message)."""
    last = max(i for i, m in enumerate(messages) if m["role"] == "user")
    said = messages[last]["content"]
    lowered = said.lower().strip()
    results = _results(messages, last)
    earlier = [m for m in messages[:last] if m["role"] == "assistant" and m["content"]]
    previous = earlier[-1]["content"] if earlier else ""
    files = FILE.findall(said)
    if files:
        return _upload(messages, said, files, results, policy)
    claim = CLAIM.search(said)
    filed = _filed(messages)
    if filed and "why" in lowered and any(c.replace("_", " ") in lowered for c in COVERAGES):
        return _say(f"Your claim {filed[0]} is filed under {filed[1]} coverage. {COVERS[filed[1]]}")
    if lowered.rstrip(".!") in ("forget it", "never mind"):
        return _say("Understood. If you need anything else about a claim, I'm here.")
    if re.fullmatch(r"(thanks|thank you|ok|great)[.!]*", lowered):
        return _say("You're welcome! Anything else about your claim?")
    if claim and not DAMAGE.search(said):
        return _status(messages, claim.group().upper(), results)
    if DAMAGE.search(said) or previous.startswith(ASKS) or "file a claim" in lowered:
        return _file(messages, last, results, policy)
    return _say(f"{HELP} How can I help?")


def _status(
    messages: list[dict[str, Any]], number: str, results: list[tuple[str, dict, Any, bool]]
) -> dict[str, Any]:
    if not results:
        return _ids(messages, [_call("lookup_claim", {"claim_number": number})])
    _, _, claim, is_error = results[-1]
    if is_error:
        return _say(
            f"I couldn't find a claim {number}. Could you check the number? Claim numbers "
            "look like CLM-1234."
        )
    text = f"Claim {claim['claim_number']} ({claim['coverage']}) is {claim['status']}."
    if claim["status"] == "approved":
        text += f" A payout of ${claim['payout']:,} is on its way."
    elif claim["status"] == "waiting for documents":
        text += " Please upload the photos or receipts your adjuster asked for."
    elif claim["status"] != "closed":
        text += f" Your adjuster is {claim['adjuster']}."
    return _say(text)


def _file(
    messages: list[dict[str, Any]],
    last: int,
    results: list[tuple[str, dict, Any, bool]],
    policy: Policy,
) -> dict[str, Any]:
    if results:
        _, arguments, claim, is_error = results[-1]
        if is_error or claim.get("status") != "open":
            return _say("Sorry, I could not file the claim. Please try again later.")
        coverage = arguments["coverage"]  # what it asked for (the tool result says the same)
        return _say(
            f"I filed claim {claim['claim_number']} under {coverage} coverage for the damage on "
            f"{arguments['incident_date']}. {COVERS[coverage]} You can add photos or receipts "
            "to it any time."
        )
    users = [m["content"] for m in messages[: last + 1] if m["role"] == "user"]
    since = users[-3:]  # what the customer said about this claim
    text = " ".join(since)
    description = next((u for u in since if DAMAGE.search(u)), None)
    number, date = POLICY.search(text), DATE.search(text)
    if description is None:
        return _say(ASK_WHAT)
    if number is None or date is None:
        return _say(ASK_POLICY if date else ASK_DATE if number else ASK_BOTH)
    first = re.split(r"(?<=[.!?])\s", description.strip())[0]
    arguments = {
        "policy_number": number.group(),
        "coverage": coverage_of(description, policy.water),
        "description": first,
        "incident_date": date.group(),
    }
    return _ids(messages, [_call("file_claim", arguments)])


def _upload(
    messages: list[dict[str, Any]],
    said: str,
    files: list[str],
    results: list[tuple[str, dict, Any, bool]],
    policy: Policy,
) -> dict[str, Any]:
    claim, filed = CLAIM.search(said), _filed(messages)
    number = claim.group().upper() if claim else filed[0] if filed else None
    if number is None:
        return _say("Which claim should I add them to?")
    if not results:
        calls = [{"claim_number": number, "filename": name} for name in files]
        return _ids(messages, [_call("upload_document", c) for c in calls])
    if not policy.reads:  # bug 2: "Done!" whatever the uploads returned
        return _say(f"Done! I uploaded {_and(files)} to claim {number}.")
    uploaded: list[str] = []
    failed: list[tuple[str, str]] = []  # file name, why
    for _, arguments, result, is_error in results:
        if not is_error and isinstance(result, dict) and result["status"] == "uploaded":
            uploaded.append(arguments["filename"])
        else:
            why = result.get("reason", "") if isinstance(result, dict) else str(result)
            failed.append((arguments["filename"], why))
    if not failed:
        return _say(f"Done! I uploaded {_and(uploaded)} to claim {number}.")
    reasons = "; ".join(f"{name}: {why}" for name, why in failed)
    done = f"I uploaded {_and(uploaded)} to claim {number}, but " if uploaded else ""
    return _say(
        f"{done}I could not upload {_and([name for name, _ in failed])} ({reasons}). Please "
        "send it as a JPG, PNG or PDF under 10 MB."
    )


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


# ---------------------------------------------------------------- agents under test


def _agent(conversation: list[dict[str, str]], tools: Any, policy: Policy) -> str:
    """One turn of the app's logic on a task's tools (a `ToolHandle`)."""
    from harness.domains import ToolError

    messages: list[dict[str, Any]] = [
        {"role": m["role"], "content": m["content"], "tool_calls": []} for m in conversation
    ]
    for _ in range(6):
        message = decide(messages, policy)
        messages.append(message)
        if not message["tool_calls"]:
            return message["content"]
        for call in message["tool_calls"]:
            try:
                content, is_error = json.dumps(tools.call(call["name"], **call["input"])), False
            except ToolError as exc:  # as the app hands a raised tool error to the model
                content, is_error = str(exc), True
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "content": content,
                    "is_error": is_error,
                }
            )
    return "Sorry, I could not finish that."


def respond(conversation: list[dict[str, str]], tools: Any) -> str:
    """Production's logic as a python agent under test (both bugs)."""
    return _agent(conversation, tools, PRODUCTION)


def respond_fixed(conversation: list[dict[str, str]], tools: Any) -> str:
    """The fixed version: files water inside the home as water_damage, and reads what each
    upload returned before saying it worked."""
    return _agent(conversation, tools, FIXED)


def respond_by_prompt(conversation: list[dict[str, str]], tools: Any) -> str:
    """Production's code following its variant's prompt, as a model would: the prompt's policy
    lines (`WATER_POLICY`, `READS_POLICY`) turn the fixes on. What `harness climb` improves."""
    return _agent(conversation, tools, Policy.of_prompt(tools.variant.full_system_prompt()))


# ---------------------------------------------------------------- the fake server's model


async def production_model(messages: list[Any]) -> Any:
    """The fake server's responder (internal `Message`s in, one out): the coverage sub-step's
    model, or the main model following the system prompt it was sent (production's prompt has
    neither policy line)."""
    from harness.transcript import Message, ToolCall

    system = "".join(m.content for m in messages if m.role == "system")
    if system == COVERAGE_PROMPT:
        coverage = re.search(r"What does (\w+) coverage", messages[-1].content)
        return Message(role="assistant", content=COVERS[coverage.group(1) if coverage else "other"])
    plain = [
        {
            "role": m.role,
            "content": m.content,
            "tool_calls": [
                {"id": c.id, "name": c.name, "input": c.arguments} for c in m.tool_calls
            ],
            "tool_call_id": m.tool_call_id,
            "is_error": m.is_error,
        }
        for m in messages
        if m.role != "system"
    ]
    answer = decide(plain, Policy.of_prompt(system))
    calls = [
        ToolCall(id=c["id"], name=c["name"], arguments=c["input"]) for c in answer["tool_calls"]
    ]
    return Message(role="assistant", content=answer["content"], tool_calls=calls)


# ---------------------------------------------------------------- the app, recorded


def _field(block: Any, name: str) -> Any:
    """A content block's field, whether the SDK's object or a dict."""
    return block.get(name) if isinstance(block, dict) else getattr(block, name)


def _streamed_events(client: Any, **request: Any) -> list[dict[str, Any]]:
    """A streamed reply's content blocks, put together from the events as SDK users do."""
    blocks: list[dict[str, Any]] = []
    partial: dict[int, str] = {}
    for event in client.messages.create(stream=True, **request):
        if event.type == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                blocks.append({"type": "tool_use", "id": block.id, "name": block.name, "input": {}})
                partial[event.index] = ""
            else:
                blocks.append({"type": "text", "text": ""})
        elif event.type == "content_block_delta":
            if event.delta.type == "text_delta":
                blocks[event.index]["text"] += event.delta.text
            elif event.delta.type == "input_json_delta":
                partial[event.index] += event.delta.partial_json
        elif event.type == "content_block_stop" and event.index in partial:
            blocks[event.index]["input"] = json.loads(partial.pop(event.index) or "{}")
    return blocks


def _streamed_text(client: Any, **request: Any) -> list[Any]:
    """A streamed reply shown as its text arrives (`text_stream`), then read whole."""
    shown = []
    with client.messages.stream(**request) as stream:
        for text in stream.text_stream:
            shown.append(text)  # what a chat UI would print
        return list(stream.get_final_message().content)


def record(store: Path, base_url: str, streaming: str = "events", count: int | None = None) -> None:
    """Serve the sessions (the first `count`, or all) through the app, recorded with
    `record_locally` into `store`. The web channel streams its replies: `events`,
    `messages.create(stream=True)`; `text`, `messages.stream(...)` read through `text_stream`."""
    import anthropic
    import weave

    from harness.tracing import record_locally

    tracer = record_locally(store)
    client = anthropic.Anthropic(base_url=base_url, api_key="sk-ant-test", max_retries=0)

    @weave.op
    def explain_coverage(coverage: str) -> str:
        with client.messages.stream(
            model=SMALL_MODEL,
            max_tokens=200,
            system=COVERAGE_PROMPT,
            messages=[{"role": "user", "content": f"What does {coverage} coverage pay for?"}],
        ) as stream:
            message = stream.get_final_message()
        return "".join(block.text for block in message.content if block.type == "text")

    backend = Backend(explain_coverage)
    tools = {t["name"]: weave.op(getattr(backend, t["name"])) for t in TOOLS}
    pool = weave.ThreadPoolExecutor(max_workers=4)
    histories: dict[str, list[dict[str, Any]]] = {}

    def complete(history: list[dict[str, Any]], channel: str) -> list[Any]:
        request = {
            "model": MODEL,
            "max_tokens": 1024,
            "system": MAIN_PROMPT,
            "messages": list(history),
            "tools": TOOLS,
        }
        if channel == "web" and streaming == "text":
            return _streamed_text(client, **request)
        if channel == "web":
            return _streamed_events(client, **request)
        return list(client.messages.create(**request).content)

    def run_tool(block: Any) -> dict[str, Any]:
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": _field(block, "id")}
        try:
            output = tools[_field(block, "name")](**_field(block, "input"))
        except ClaimNotFound as exc:
            return {**result, "content": f"ClaimNotFound: {exc}", "is_error": True}
        return {**result, "content": json.dumps(output)}

    @weave.op
    def handle_turn(session_id: str, channel: str, text: str) -> str:
        history = histories.setdefault(session_id, [])
        history.append({"role": "user", "content": text})
        for _ in range(6):
            content = complete(history, channel)
            history.append({"role": "assistant", "content": content})
            uses = [b for b in content if _field(b, "type") == "tool_use"]
            if not uses:
                return "".join(_field(b, "text") for b in content if _field(b, "type") == "text")
            history.append({"role": "user", "content": list(pool.map(run_tool, uses))})
        return "Sorry, I could not finish that."

    @weave.op
    def chat_session(session_id: str, channel: str, texts: list[str]) -> list[str]:
        replies = []
        for index, text in enumerate(texts):
            reply, call = handle_turn.call(session_id, channel, text)
            replies.append(reply)
            for turn, reaction, note in FEEDBACK.get(session_id, []):
                if turn == index:
                    _rate(call, reaction, note)
        return replies

    for position, (session, texts) in enumerate(list(SESSIONS.items())[:count]):
        channel = channel_of(position)
        with weave.thread(session):
            _, root = chat_session.call(session, channel, texts)
        for turn, reaction, note in FEEDBACK.get(session, []):
            if turn is None:
                _rate(root, reaction, note)
    pool.shutdown()
    tracer.close()


def channel_of(position: int) -> str:
    """The channel of the session at `position` in `SESSIONS`: web (streamed), or mobile."""
    return "web" if position % 2 == 0 else "mobile"


def _rate(call: Any, reaction: str | None, note: str | None) -> None:
    if reaction:
        call.feedback.add_reaction(reaction)
    if note:
        call.feedback.add_note(note)


if __name__ == "__main__":
    streaming = sys.argv[3] if len(sys.argv) > 3 else "events"
    record(
        Path(sys.argv[1]), sys.argv[2], streaming, int(sys.argv[4]) if len(sys.argv) > 4 else None
    )

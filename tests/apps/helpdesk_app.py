"""An IT-helpdesk chat agent written for the tests, shaped unlike the support desk and unlike
anything the converter was written against:

- one root op per chat session (`chat_session`, in a `weave.thread`) with a turn op per user
  message below it (`handle_turn`, whose input is the user's text, not a message list);
- a nested triage sub-agent (`triage`) with its own model call and its own system prompt;
- the main model call streamed (`stream=True`, `stream_options.include_usage`), its tool calls
  arriving as deltas, through the real `openai` client (weave patches it);
- parallel tool calls run on a thread pool;
- tool failures returned as values, never raised, in the shapes real APIs use: `{"error":
  "..."}`, `{"error": {"code": ..., "message": ...}}`, `{"errors": [...]}`, `{"ok": false}`,
  `{"status": "failed"}`, `{"status_code": 503}`, an exception-shaped string;
- history kept between turns as visible text only: each turn re-sends the earlier user and
  assistant texts, without the tool calls;
- feedback (reactions, notes) on the turn calls, not on the session's root.

Production has three bugs, which `respond_fixed` fixes:
1. it never reads what an action returned and says "Done!" whatever it was (silent failures):
   it resets a password in parallel with looking the user up, even of a locked account, and
   grants, installs, orders and maps whatever the tool answered;
2. the triage sub-agent raises `TypeError` on a category it has no urgency for (printers);
3. it opens every ticket at `normal` priority, even an outage the user calls urgent.

`respond_by_prompt` is production's code following its variant's prompt, as a model would (the
fixes of bugs 1 and 3 are policy lines a prompt can state), for `harness climb`.

Record: `python tests/apps/helpdesk_app.py STORE MODEL_URL`, the model served at MODEL_URL by a
`FakeServer(responder=production_model)`.
"""

from __future__ import annotations

import copy
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MAIN_PROMPT = "You are the IT helpdesk assistant of Corp. Use the tools to help employees."
TRIAGE_PROMPT = 'You triage IT requests. Answer with JSON: {"category": ...}.'
USERS: dict[str, dict[str, Any]] = {
    "jdoe": {"email": "jane.doe@corp.example", "locked": True},
    "asmith": {"email": "al.smith@corp.example", "locked": True},
    "bwong": {"email": "b.wong@corp.example", "locked": True},
    "ckim": {"email": "chris.kim@corp.example", "locked": False},
    "dpatel": {"email": "dev.patel@corp.example", "locked": False},
    "evans": {"email": "e.evans@corp.example", "locked": False, "changed_today": True},
    "fgarcia": {"email": "f.garcia@corp.example", "locked": False},
}
DEVICES = {"PC-0042": {"health": "ok", "disk_free_gb": 120}, "PC-0077": {"health": "ok"}}
SESSIONS: dict[str, list[str]] = {
    "pw-jdoe": ["Hi, I forgot my password. My username is jdoe."],
    "pw-asmith": ["reset my password please, user asmith"],
    "pw-bwong": ["Can you reset the password for bwong?", "It still says my account is locked!"],
    "pw-evans": ["password reset for evans please"],
    "pw-ckim": ["I need a password reset for ckim", "Great, thanks!"],
    "pw-dpatel": ["Password reset please, username dpatel."],
    "access-payroll": ["I need access to payroll, I'm fgarcia"],
    "access-github": ["Please give dpatel access to github"],
    "access-jira": ["Can ckim get access to jira?"],
    "install-visio": ["Install visio on PC-0042 please"],
    "install-slack": ["install slack on PC-0077"],
    "group-finance": ["Add ckim to finance-admins"],
    "order-monitor": ["I'd like to order a monitor-27"],
    "drive-hr": ["map drive \\\\fs01\\hr for me"],
    "drive-eng": ["Could you map drive \\\\fs01\\eng?"],
    "device-ok": ["Is my computer PC-0042 healthy?", "ok thanks", "bye"],
    "device-down": ["Is PC-0099 healthy?"],
    "device-unknown": ["check PC-1234 please"],
    "printer-1": ["The printer on floor 3 is jammed again."],
    "printer-2": ["printer says paper jam, can you help?"],
    "printer-3": ["Our printer is offline since lunch."],
    "printer-4": ["The big printer near reception prints blank pages"],
    "vpn-sales": ["The VPN is down for our whole sales team since this morning, it's urgent!"],
    "mail-finance": ["Email is down for everyone in finance, urgent please"],
    "monitor": ["My monitor flickers all the time, can you open a ticket?"],
}
FEEDBACK: dict[str, tuple[int, str | None]] = {  # session: (turn index, note; None: a 👎 only)
    "pw-asmith": (0, None),
    "pw-bwong": (1, "Bot told the user the password was reset but the account is still locked."),
    "vpn-sales": (0, "The whole team was blocked and the user said urgent: this should be high."),
    "mail-finance": (0, "An outage of a whole department is high priority, not normal!"),
}
READS = "Read every tool result before telling the user a step worked"
URGENT_POLICY = "Open outages and urgent requests at high priority"
URGENCY = {"account": 1, "network": 3, "device": 1, "access": 1, "other": 1}


def _tool(name: str, description: str, **properties: Any) -> dict[str, Any]:
    parameters = {"type": "object", "properties": properties, "required": list(properties)}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


STRING = {"type": "string"}
TOOLS = [
    _tool("lookup_user", "An employee's account.", username=STRING),
    _tool("reset_password", "Send a temporary password.", username=STRING),
    _tool(
        "create_ticket",
        "Open an incident ticket.",
        summary=STRING,
        priority={"type": "string", "enum": ["low", "normal", "high"]},
    ),
    _tool("device_status", "A managed computer's health.", device_id=STRING),
    _tool(
        "grant_access", "Give an employee access to an application.", username=STRING, app=STRING
    ),
    _tool("install_software", "Install a package on a computer.", device_id=STRING, package=STRING),
    _tool("add_to_group", "Add an employee to a directory group.", username=STRING, group=STRING),
    _tool("order_hardware", "Order a catalogue item.", item=STRING),
    _tool("map_drive", "Map a network share.", path=STRING),
]
DEVICE = re.compile(r"\bPC-\d+\b")
SHARE = re.compile(r"\\\\\S+?(?=[\s?!,]|$)")
URGENT = re.compile(r"\b(urgent|down|outage|everyone|whole)\b", re.IGNORECASE)


class Backend:
    """Production's IT systems: failures come back as values, in the shapes real APIs use."""

    def __init__(self) -> None:
        self.users = copy.deepcopy(USERS)
        self.made = 3000

    def _new(self, prefix: str) -> str:
        self.made += 1
        return f"{prefix}-{self.made}"

    def lookup_user(self, username: str) -> dict[str, Any]:
        user = self.users.get(username)
        if user is None:
            return {"error": f"no user {username}"}
        return {"username": username, "email": user["email"], "locked": user["locked"]}

    def reset_password(self, username: str) -> dict[str, Any]:
        user = self.users[username]
        if user["locked"]:
            return {"error": f"account {username} is locked"}
        if user.get("changed_today"):
            message = "password changed less than 24 hours ago"
            return {"error": {"code": "RECENT_CHANGE", "message": message}}
        return {"ok": True, "sent_to": user["email"]}

    def create_ticket(self, summary: str, priority: str) -> dict[str, Any]:
        return {"ticket": self._new("INC"), "priority": priority, "summary": summary}

    def device_status(self, device_id: str) -> dict[str, Any]:
        if device_id == "PC-0099":
            return {"status_code": 503, "message": "device management service unavailable"}
        if device_id not in DEVICES:
            return {"status_code": 404, "message": f"unknown device {device_id}"}
        return {"device_id": device_id, **DEVICES[device_id]}

    def grant_access(self, username: str, app: str) -> dict[str, Any]:
        if app == "payroll":
            return {"status": "failed", "message": f"manager approval required for {app}"}
        if app == "github":
            return {"status": "error", "message": f"app {app} is not in the catalogue"}
        return {"status": "granted", "username": username, "app": app}

    def install_software(self, device_id: str, package: str) -> dict[str, Any]:
        if package == "visio":
            return {"ok": False, "message": f"no licences left for {package}"}
        return {"ok": True, "job": self._new("JOB")}

    def add_to_group(self, username: str, group: str) -> dict[str, Any]:
        if group.endswith("-admins"):
            return {"errors": [f"group {group} is restricted"]}
        return {"added": True}

    def order_hardware(self, item: str) -> dict[str, Any]:
        if item == "monitor-27":
            return {"error": f"item {item} is out of stock"}
        return {"order": self._new("PO")}

    def map_drive(self, path: str) -> Any:
        if path.endswith("hr"):
            return f"PermissionError: access denied to {path}"
        return {"mapped": path, "letter": "H:"}


def category(text: str) -> str:
    """The triage model's answer."""
    lowered = text.lower()
    if "password" in lowered or "locked" in lowered:
        return "account"
    if "printer" in lowered:
        return "printing"  # a category the app has no urgency for: bug 2
    if any(w in lowered for w in ("vpn", "email", "network")):
        return "network"
    if "access" in lowered or "group" in lowered:
        return "access"
    if "monitor" in lowered or "install" in lowered or DEVICE.search(text):
        return "device"
    return "other"


def urgency(found: str, fixed: bool) -> int:
    """The app's post-processing of the triage: production raises TypeError on `printing`."""
    weight = URGENCY.get(found, 1) if fixed else URGENCY.get(found)
    return weight * 2  # type: ignore[operator]


def problem(result: Any) -> str | None:
    """What the app's code reads as a failed call (the fixed version reads it)."""
    if isinstance(result, str):
        return result if "Error" in result.split(":")[0] else None
    error = result.get("error") or (result.get("errors") or [None])[0]
    if isinstance(error, dict):
        return error["message"]
    if error:
        return str(error)
    if result.get("ok") is False or result.get("status") in ("failed", "error"):
        return result["message"]
    if result.get("status_code", 200) >= 400:
        return result["message"]
    return None


def _calls(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{name}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for i, (name, arguments) in enumerate(calls)
        ],
    }


def _say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def _results(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """This turn's tool results by tool name."""
    names = {
        c["id"]: c["function"]["name"]
        for m in messages
        if m["role"] == "assistant"
        for c in m.get("tool_calls") or []
    }
    return {
        names[m["tool_call_id"]]: json_or_text(m["content"])
        for m in messages
        if m["role"] == "tool"
    }


def json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def decide(messages: list[dict[str, Any]], reads: bool, urgent: bool) -> dict[str, Any]:
    """The main model: the next assistant message (OpenAI wire format). `reads`: it reads the
    tool results before saying a step worked; `urgent`: it opens urgent outages at high."""
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    said, results = messages[last_user]["content"], _results(messages[last_user:])
    lowered = said.lower()
    words = re.findall(r"[a-z0-9-]+", lowered)
    user = next((w for w in words if w in USERS), None)
    if "password" in lowered and user:
        return _password(user, results, reads)
    if "locked" in lowered:
        return _say("Please try again in a few minutes.")
    action = _action(said, words, user)
    if action is not None:
        tool, arguments, done = action
        if tool not in results:
            return _calls((tool, arguments))
        failed = problem(results[tool])
        if reads and failed:
            return _say(f"I could not do that: {failed}.")
        return _say(f"Done! {done}")
    device = DEVICE.search(said)
    if device:
        if "device_status" not in results:
            return _calls(("device_status", {"device_id": device.group()}))
        failed = problem(results["device_status"])
        if reads and failed:
            return _say(f"I could not check {device.group()}: {failed}.")
        return _say(f"All set: {device.group()} is healthy.")
    if any(w in lowered for w in ("printer", "vpn", "email", "monitor", "down")):
        if "create_ticket" not in results:
            priority = "high" if urgent and URGENT.search(said) else "normal"
            summary = " ".join(said.split()[:6])
            return _calls(("create_ticket", {"summary": summary, "priority": priority}))
        ticket = results["create_ticket"]
        if "ticket" not in ticket:
            return _say(f"Sorry, I could not open a ticket: {problem(ticket)}.")
        return _say(f"I opened {ticket['ticket']} ({ticket['priority']} priority) for you.")
    if "thank" in lowered or lowered.strip() in ("ok", "bye"):
        return _say("You're welcome!")
    return _say("How can I help?")


def _action(said: str, words: list[str], user: str | None) -> tuple[str, dict, str] | None:
    """The one-call requests: the tool, its arguments, and what production says it did."""
    after = {w: words[i + 1] for i, w in enumerate(words[:-1])}
    device = DEVICE.search(said)
    share = SHARE.search(said)
    if "access" in words and user:
        app = after["to"]
        return "grant_access", {"username": user, "app": app}, f"{user} now has access to {app}."
    if "install" in words and device:
        package = after["install"]
        arguments = {"device_id": device.group(), "package": package}
        return "install_software", arguments, f"{package} is installed on {device.group()}."
    if "add" in words and user:
        group = after["to"]
        return "add_to_group", {"username": user, "group": group}, f"{user} is now in {group}."
    if "order" in words:
        item = after[after["order"]] if after["order"] in ("a", "an") else after["order"]
        return "order_hardware", {"item": item}, f"Your {item} is on order."
    if "map" in words and share:
        path = share.group()
        return "map_drive", {"path": path}, f"{path} is mapped."
    return None


def _password(user: str, results: dict[str, Any], reads: bool) -> dict[str, Any]:
    if not reads:  # looks up and resets at once, and never reads the reset's result: bug 1
        if "reset_password" not in results:
            return _calls(
                ("lookup_user", {"username": user}), ("reset_password", {"username": user})
            )
        return _say(f"Done! A temporary password was sent to {results['lookup_user']['email']}.")
    if "lookup_user" not in results:
        return _calls(("lookup_user", {"username": user}))
    account = results["lookup_user"]
    if account.get("locked"):
        return _say(
            f"Your account {user} is locked, so I could not reset your password. Please call "
            "the security desk on extension 4400 to unlock it."
        )
    if "reset_password" not in results:
        return _calls(("reset_password", {"username": user}))
    failed = problem(results["reset_password"])
    if failed:
        return _say(f"I could not reset your password: {failed}.")
    return _say(f"Done! A temporary password was sent to {results['reset_password']['sent_to']}.")


def run_turn(
    history: list[dict[str, Any]],
    complete: Callable[[list[dict[str, Any]]], dict[str, Any]],
    call_tools: Callable[[list[tuple[str, dict[str, Any]]]], list[Any]],
) -> str:
    """One user turn: ask the model, run the tools it asks for, until it answers in text."""
    turn = list(history)
    for _ in range(6):
        message = complete(turn)
        turn.append(message)
        if not message.get("tool_calls"):
            return message["content"]
        calls = message["tool_calls"]
        asked = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]
        for call, result in zip(calls, call_tools(asked), strict=True):
            turn.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)})
    return "Sorry, I could not finish that."


def _agent(
    conversation: list[dict[str, str]], tools: Any, reads: bool, urgent: bool, triaged: bool
) -> str:
    from harness.domains import ToolError

    def call(name: str, arguments: dict[str, Any]) -> Any:
        try:
            return tools.call(name, **arguments)
        except ToolError as exc:  # as production's API answers a failure: a value
            return {"error": str(exc)}

    history = [{"role": "system", "content": MAIN_PROMPT}, *(dict(m) for m in conversation)]
    urgency(category(conversation[-1]["content"]), triaged)
    return run_turn(
        history,
        lambda h: decide(h, reads, urgent),
        lambda asked: [call(n, a) for n, a in asked],
    )


def respond(conversation: list[dict[str, str]], tools: Any) -> str:
    """Production's logic as a python agent under test."""
    return _agent(conversation, tools, reads=False, urgent=False, triaged=False)


def respond_fixed(conversation: list[dict[str, str]], tools: Any) -> str:
    """The fixed version: reads what the tools returned, triages every category, and opens
    an urgent outage at high priority."""
    return _agent(conversation, tools, reads=True, urgent=True, triaged=True)


def respond_by_prompt(conversation: list[dict[str, str]], tools: Any) -> str:
    """Production's code following its variant's prompt, as a model would: the prompt's policy
    lines (`READS`, `URGENT_POLICY`) turn the first and third fixes on; the triage bug is in
    code, so no prompt fixes it. What `harness climb` can improve."""
    prompt = tools.variant.full_system_prompt().lower()
    reads, urgent = READS.lower() in prompt, URGENT_POLICY.lower() in prompt
    return _agent(conversation, tools, reads=reads, urgent=urgent, triaged=False)


async def production_model(messages: list[Any]) -> Any:
    """The fake server's responder: the triage model or production's main model."""
    from harness.models import wire_openai
    from harness.transcript import Message

    wire = wire_openai.to_wire_messages(messages)
    if wire and wire[0]["role"] == "system" and wire[0]["content"] == TRIAGE_PROMPT:
        answer = json.dumps({"category": category(wire[-1]["content"])})
        return Message(role="assistant", content=answer)
    return wire_openai.from_wire_messages([decide(wire, reads=False, urgent=False)])[0]


def _streamed(client: Any, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A streamed completion, its text and tool-call deltas put together as the app's SDK
    users do."""
    stream = client.chat.completions.create(
        model="gpt-4.1-mini",
        messages=messages,
        tools=TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    )
    text, calls = "", {}
    for chunk in stream:
        if not chunk.choices:
            continue  # the usage chunk
        delta = chunk.choices[0].delta
        text += delta.content or ""
        for part in delta.tool_calls or []:
            call = calls.setdefault(
                part.index,
                {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
            )
            call["id"] = part.id or call["id"]
            if part.function is not None:
                call["function"]["name"] += part.function.name or ""
                call["function"]["arguments"] += part.function.arguments or ""
    if calls:
        return {"role": "assistant", "content": text or None, "tool_calls": list(calls.values())}
    return {"role": "assistant", "content": text}


def record(store: Path, base_url: str) -> None:
    """Serve the sessions through the app, recorded with `record_locally` into `store`."""
    import openai
    import weave

    from harness.tracing import record_locally

    tracer = record_locally(store)
    backend = Backend()
    tools = {
        t["function"]["name"]: weave.op(getattr(backend, t["function"]["name"])) for t in TOOLS
    }
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="sk-test")
    pool = weave.ThreadPoolExecutor(max_workers=4)

    @weave.op
    def triage(text: str) -> int:
        reply = client.chat.completions.create(
            model="gpt-4.1-nano",
            messages=[
                {"role": "system", "content": TRIAGE_PROMPT},
                {"role": "user", "content": text},
            ],
        )
        return urgency(json.loads(reply.choices[0].message.content)["category"], fixed=False)

    def call_tools(asked: list[tuple[str, dict[str, Any]]]) -> list[Any]:
        return list(pool.map(lambda call: tools[call[0]](**call[1]), asked))

    @weave.op
    def handle_turn(session_id: str, text: str, history: list[dict[str, str]]) -> str:
        triage(text)
        sent = [
            {"role": "system", "content": MAIN_PROMPT},
            *history,
            {"role": "user", "content": text},
        ]
        return run_turn(sent, lambda messages: _streamed(client, messages), call_tools)

    @weave.op
    def chat_session(session_id: str, texts: list[str]) -> list[str]:
        visible: list[dict[str, str]] = []  # what the chat window shows: no tool calls
        replies = []
        for index, text in enumerate(texts):
            reply, call = handle_turn.call(session_id, text, list(visible))
            if call.exception:
                replies.append("Sorry, something went wrong on our side.")
                break
            visible += [{"role": "user", "content": text}, {"role": "assistant", "content": reply}]
            replies.append(reply)
            turn, note = FEEDBACK.get(session_id, (-1, None))
            if turn == index:
                call.feedback.add_reaction("👎")
                if note:
                    call.feedback.add_note(note)
        return replies

    for session, texts in SESSIONS.items():
        with weave.thread(session):
            chat_session(session, texts)
    pool.shutdown()
    tracer.close()


if __name__ == "__main__":
    record(Path(sys.argv[1]), sys.argv[2])

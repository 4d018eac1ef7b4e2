"""The bundled support bot, noting its replies so that a test can count the episodes each
process played (stored rows cannot tell: their keys are unique). When `AGENT_CALLS_LOG` names a
file, each reply adds a line to it: the process id, and 1 if the reply opens an episode (the
conversation holds no reply yet), else 0."""

import importlib.util
import os
from pathlib import Path

spec = importlib.util.spec_from_file_location(
    "support_bot", Path(__file__).resolve().parents[2] / "agents" / "support_bot.py"
)
support_bot = importlib.util.module_from_spec(spec)
spec.loader.exec_module(support_bot)


def respond(conversation, tools):
    log = os.environ.get("AGENT_CALLS_LOG")
    if log:
        opens = all(message["role"] != "assistant" for message in conversation)
        with open(log, "a") as calls:
            calls.write(f"{os.getpid()} {int(opens)}\n")
    return support_bot.respond(conversation, tools)

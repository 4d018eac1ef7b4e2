"""The bundled support bot, slowed down: long enough episodes to kill a run in the middle."""

import importlib.util
import time
from pathlib import Path

spec = importlib.util.spec_from_file_location(
    "support_bot", Path(__file__).resolve().parents[2] / "agents" / "support_bot.py"
)
support_bot = importlib.util.module_from_spec(spec)
spec.loader.exec_module(support_bot)


def respond(conversation, tools):
    time.sleep(0.15)
    return support_bot.respond(conversation, tools)

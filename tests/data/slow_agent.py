"""The bundled support bot, slowed down: long enough episodes to kill a run in the middle.
Each reply waits `SLOW_AGENT_S` seconds (0.15 unless set: a run that is not to be killed may
take none), and is noted as `logged_agent.py` notes it."""

import importlib.util
import os
import time
from pathlib import Path

spec = importlib.util.spec_from_file_location(
    "logged_agent", Path(__file__).resolve().with_name("logged_agent.py")
)
logged_agent = importlib.util.module_from_spec(spec)
spec.loader.exec_module(logged_agent)


def respond(conversation, tools):
    time.sleep(float(os.environ.get("SLOW_AGENT_S", "0.15")))
    return logged_agent.respond(conversation, tools)

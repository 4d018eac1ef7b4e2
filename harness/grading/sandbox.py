"""Run checker code shipped with a task (VerIF style) where it cannot hurt the harness.

The code is untrusted: it must not read the harness's secrets (its environment, its files), write
outside a directory of its own, start processes, use the network or run past its limits, and
nothing it prints may pass for its result. Every backend runs the same child program
(`_sandbox_child.py`: resource limits, an audit hook that ends the checker at the first refused
operation, the call, the result on a channel of its own), inside the strongest boundary this
machine has, chosen in this order and named in every result:

- `docker`, when an engine answers (`sandbox_docker`);
- `bwrap`, bubblewrap namespaces, when it is installed and allowed (`sandbox_local`);
- `subprocess`, rlimits and the audit hook only: not a security boundary, so a run that used it
  says so in its summary.

`HARNESS_SANDBOX=docker|bwrap|subprocess` chooses one.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from harness.grading.sandbox_docker import (
    DOCKER_IMAGE,
    docker_available,
    docker_container_config,
    run_docker,
)
from harness.grading.sandbox_local import bwrap_available, run_local
from harness.grading.sandbox_result import (
    MAX_MEMORY_MB,
    MAX_TIMEOUT_S,
    STDOUT_LIMIT,
    SandboxLimits,
    SandboxResult,
)

__all__ = [
    "BACKENDS",
    "MAX_MEMORY_MB",
    "MAX_TIMEOUT_S",
    "STDOUT_LIMIT",
    "SandboxLimits",
    "SandboxResult",
    "available_backends",
    "choose_backend",
    "docker_available",
    "docker_container_config",
    "run_checker",
]

BACKENDS = ("docker", "bwrap", "subprocess")  # strongest first
UNSANDBOXED = "subprocess"  # the backend that is no boundary
DEFAULT_LIMITS = SandboxLimits()


def available_backends() -> list[str]:
    """The backends this machine can run, strongest first (`subprocess` always)."""
    found = {"docker": docker_available(), "bwrap": bwrap_available(), "subprocess": True}
    return [name for name in BACKENDS if found[name]]


def sandbox_env_problem() -> str | None:
    """What is wrong with `HARNESS_SANDBOX`, if anything: checked when a command starts, so a
    misspelt backend is bad input at once, not an error in every check of a finished run."""
    chosen = os.environ.get("HARNESS_SANDBOX", "").strip()
    if chosen and chosen not in BACKENDS:
        return f"HARNESS_SANDBOX={chosen!r}: expected one of {', '.join(BACKENDS)}"
    return None


def choose_backend() -> str:
    """`HARNESS_SANDBOX` when set, else the strongest available backend."""
    chosen = os.environ.get("HARNESS_SANDBOX", "").strip()
    if chosen:
        problem = sandbox_env_problem()
        if problem is not None:
            raise ValueError(problem)
        return chosen
    return "docker" if docker_available() else "bwrap" if bwrap_available() else UNSANDBOXED


async def run_checker(
    code: str,
    function: str,
    args: list[Any],
    limits: SandboxLimits = DEFAULT_LIMITS,
    *,
    backend: str | None = None,
    image: str = DOCKER_IMAGE,
) -> SandboxResult:
    """Define `code`, call `function(*args)` (args are JSON data), return its JSON result.

    Whatever the checker does comes back as a result, never as an exception. `backend` forces
    one (default: `choose_backend()`); `image` is the Docker image.
    """
    payload = json.dumps({"code": code, "function": function, "args": args}).encode() + b"\n"
    backend = backend or await asyncio.to_thread(choose_backend)
    if backend == "docker":
        return await asyncio.to_thread(run_docker, payload, limits, image)
    return await run_local(payload, limits, backend)

"""Run checker code shipped with a task (VerIF style) where it cannot hurt the harness.

The code is untrusted: it must not read the harness's secrets (its environment, its files), write
outside a directory of its own, start processes, use the network or run past its limits, and
nothing it prints may pass for its result. Every backend runs the same program
(`checker.py` then `supervisor.py`: a trusted supervisor that alone talks to the harness, and
the checker in a process of its own with its rlimits and an audit hook that ends it at the
first refused operation; a value counts only when the function returned and left nothing
running), inside the strongest boundary this machine has, each check in a cgroup of its own
where one can be made (`cgroup`), named in every result:

- `docker`, when an engine answers (`docker`);
- `bwrap`, bubblewrap namespaces, when it is installed and allowed (`local`);
- `subprocess`, rlimits and the audit hook only: not a security boundary, so it runs only where
  the user allowed it explicitly (`--unsafe-checkers`, a grade node's `sandbox: none`, or
  `HARNESS_SANDBOX=none`); its verdicts and the run's summary say so. Without that permission
  and without OS isolation, checker code is refused (`NoSandbox`): the audit hook is an extra
  layer, never the sandbox.

`HARNESS_SANDBOX=docker|bwrap|none` chooses one (`none`: the `subprocess` backend).

Checks at once are bounded machine-wide (`slots`): a check waits for a slot before its sandbox
starts. What every backend shares (the limits, the result, the program's command line) is in
`result`.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
from typing import Any

from harness.grading.sandbox.docker import (
    DOCKER_IMAGE,
    IMAGE_ENV,
    docker_available,
    docker_container_config,
    docker_image,
    image_problem,
    run_docker,
)
from harness.grading.sandbox.local import bwrap_available, run_local
from harness.grading.sandbox.result import (
    MAX_MEMORY_MB,
    MAX_TIMEOUT_S,
    STDOUT_LIMIT,
    WORKDIR_MB,
    SandboxLimits,
    SandboxResult,
)
from harness.grading.sandbox.slots import CHECKS_ENV, MEMORY_ENV, SLOTS, env_int, machine_budget

__all__ = [
    "BACKENDS",
    "DOCKER_IMAGE",
    "MAX_MEMORY_MB",
    "MAX_TIMEOUT_S",
    "STDOUT_LIMIT",
    "NoSandbox",
    "SandboxLimits",
    "SandboxResult",
    "available_backends",
    "choose_backend",
    "docker_available",
    "docker_container_config",
    "isolation_available",
    "isolation_problem",
    "run_checker",
]

BACKENDS = ("docker", "bwrap", "subprocess")  # strongest first
UNSANDBOXED = "subprocess"  # the backend that is no boundary
# HARNESS_SANDBOX's values, and the backend each chooses
SANDBOX_ENV = {"docker": "docker", "bwrap": "bwrap", "none": UNSANDBOXED}
DEFAULT_LIMITS = SandboxLimits()
INSTALL_BWRAP = "install bubblewrap (apt-get install bubblewrap / dnf install bubblewrap)"
ISOLATION_FIX = f"{INSTALL_BWRAP}, or pass --unsafe-checkers to run checker code without isolation"


class NoSandbox(RuntimeError):
    """Checker code was to run where there is no OS isolation, and nobody allowed that."""

    def __init__(self, problem: str):
        super().__init__(f"python checks need OS isolation, and {problem}")


def available_backends() -> list[str]:
    """The backends this machine can run, strongest first (`subprocess` always, though only
    with the user's explicit permission: `choose_backend`)."""
    found = {"docker": docker_available(), "bwrap": bwrap_available(), "subprocess": True}
    return [name for name in BACKENDS if found[name]]


def sandbox_env_problem() -> str | None:
    """What is wrong with `HARNESS_SANDBOX`, if anything: checked when a command starts, so a
    misspelt backend is bad input at once, not an error in every check of a finished run."""
    chosen = os.environ.get("HARNESS_SANDBOX", "").strip()
    if chosen and chosen not in SANDBOX_ENV:
        return f"HARNESS_SANDBOX={chosen!r}: expected one of docker, bwrap, none"
    for name in (MEMORY_ENV, CHECKS_ENV):
        try:
            env_int(name)
        except ValueError as exc:
            return str(exc)
    if os.environ.get(IMAGE_ENV, "").strip():
        problem = image_problem(docker_image())
        if problem is not None:
            return f"{IMAGE_ENV}: {problem}"
    return None


def _forced() -> str | None:
    """The backend `HARNESS_SANDBOX` forces, if it is set (and valid)."""
    chosen = os.environ.get("HARNESS_SANDBOX", "").strip()
    if not chosen:
        return None
    problem = sandbox_env_problem()
    if problem is not None:
        raise ValueError(problem)
    return SANDBOX_ENV[chosen]


def isolation_problem(unsafe: bool = False) -> str | None:
    """Why checker code may not run here and what to do, as the end of a sentence ("python
    checks need OS isolation, and ..."); None when it may: under Docker or bubblewrap, or
    without isolation where the user allowed it (`unsafe`, or `HARNESS_SANDBOX=none`). A
    backend that `HARNESS_SANDBOX` forces must be there, permission or not."""
    forced = _forced()
    if forced == UNSANDBOXED:
        return None
    if forced == "docker" and not docker_available():
        if importlib.util.find_spec("docker") is None:
            return (
                "HARNESS_SANDBOX=docker chooses Docker, whose Python client is not installed: "
                "pip install 'harness[docker]', or unset HARNESS_SANDBOX"
            )
        return (
            "HARNESS_SANDBOX=docker chooses Docker, whose engine does not answer here: start "
            "one, or unset HARNESS_SANDBOX"
        )
    if forced == "bwrap" and not bwrap_available():
        return (
            "HARNESS_SANDBOX=bwrap chooses bubblewrap, which is missing or may not create "
            f"namespaces here: {INSTALL_BWRAP}, or unset HARNESS_SANDBOX"
        )
    if forced is not None or unsafe or docker_available() or bwrap_available():
        return None
    if shutil.which("bwrap") is not None:  # installed, but user namespaces are refused
        return (
            "bubblewrap is installed but may not create user namespaces here (on Ubuntu 24.04, "
            "give bwrap an AppArmor profile that allows them) and no Docker engine answers: "
            "allow them, or pass --unsafe-checkers to run checker code without isolation"
        )
    return f"neither bubblewrap nor a Docker engine is available here: {ISOLATION_FIX}"


def isolation_available() -> bool:
    """Whether checker code would run under OS isolation here (Docker or bubblewrap), for the
    checks a command makes before it runs anything."""
    return _forced() != UNSANDBOXED and isolation_problem() is None


def choose_backend(unsafe: bool = False) -> str:
    """The backend `HARNESS_SANDBOX` forces, else the strongest with OS isolation; `subprocess`
    only where the user allowed it (`unsafe`, `HARNESS_SANDBOX=none`), else `NoSandbox`."""
    problem = isolation_problem(unsafe)
    if problem is not None:
        raise NoSandbox(problem)
    forced = _forced()
    if forced is not None:
        return forced
    return "docker" if docker_available() else "bwrap" if bwrap_available() else UNSANDBOXED


async def run_checker(
    code: str,
    function: str,
    args: list[Any],
    limits: SandboxLimits = DEFAULT_LIMITS,
    *,
    backend: str | None = None,
    unsafe: bool = False,
    image: str | None = None,
) -> SandboxResult:
    """Define `code`, call `function(*args)` (args are JSON data), return its JSON result.

    Whatever the checker does comes back as a result, never as an exception. `backend` forces
    one (default: `choose_backend(unsafe)`; where it refuses, the result is that error, with no
    backend: commands refuse such runs before they start, this is the second line); `image` is
    the Docker image (default: `docker_image()`; pinned by digest). The sandbox starts once a
    slot is free (`slots.Slots`)."""
    payload = json.dumps({"code": code, "function": function, "args": args}).encode() + b"\n"
    if backend is None:
        try:
            backend = await asyncio.to_thread(choose_backend, unsafe)
        except NoSandbox as exc:
            return SandboxResult(ok=False, error=str(exc), backend="")
    try:
        machine_budget()
    except ValueError as exc:  # a bad HARNESS_SANDBOX_MEMORY_MB or _CHECKS
        return SandboxResult(ok=False, error=str(exc), backend=backend)
    async with SLOTS.hold(limits.memory_mb + WORKDIR_MB):
        if backend == "docker":
            return await asyncio.to_thread(run_docker, payload, limits, image or docker_image())
        return await run_local(payload, limits, backend)

"""What every sandbox backend shares: the limits of one checker call, the child's command line,
and reading what the child left on its result channel into a `SandboxResult`."""

from __future__ import annotations

import functools
import json
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.grading._sandbox_child import REFUSED, REFUSED_STATUS

MAX_TIMEOUT_S = 300  # a checker reads one transcript: more than this is a mistake
MAX_MEMORY_MB = 4096
WORKDIR = "/sandbox"  # the checker's working folder inside a container or namespace
WORKDIR_MB = 32  # its size there (a tmpfs)
STDOUT_LIMIT = 4096  # bytes of the checker's output kept
RESULT_LIMIT = 1024 * 1024  # bytes of JSON result accepted


@dataclass(frozen=True)
class SandboxLimits:
    """What one checker call may use; the defaults suit code that reads a transcript."""

    wall_s: float = 10.0  # wall-clock timeout, interpreter start included
    cpu_s: int = 5  # RLIMIT_CPU
    memory_mb: int = 512  # RLIMIT_AS (address space)
    file_mb: int = 1  # RLIMIT_FSIZE: the largest file the checker may write
    open_files: int = 64  # RLIMIT_NOFILE
    file_writes: int = 100  # opens for writing, mkdir, rename...: with file_mb, bounds disk use

    def __post_init__(self) -> None:
        if not 0 < self.wall_s <= MAX_TIMEOUT_S or not 0 < self.cpu_s <= MAX_TIMEOUT_S:
            raise ValueError(f"sandbox times must be within (0, {MAX_TIMEOUT_S}] seconds")
        if not 0 < self.memory_mb <= MAX_MEMORY_MB:
            raise ValueError(f"sandbox memory must be within (0, {MAX_MEMORY_MB}] MB")


@dataclass(frozen=True)
class SandboxResult:
    """What one checker call came to: its value, or one line saying why there is none."""

    ok: bool  # the function returned
    value: Any = None  # its return value, JSON-decoded (tuples arrive as lists)
    error: str = ""  # one line: why it did not return
    stdout: str = ""  # what the checker printed (stdout and stderr), truncated
    backend: str = ""  # where it ran: "docker", "bwrap" or "subprocess"


@functools.cache
def child_source() -> str:
    return Path(__file__).with_name("_sandbox_child.py").read_text()


def child_command(python: str, limits: SandboxLimits) -> list[str]:
    """The child's command line; its limits travel as arguments, the payload on stdin."""
    numbers = (
        limits.cpu_s,
        limits.memory_mb,
        limits.file_mb,
        limits.open_files,
        limits.file_writes,
    )
    return [python, "-I", "-S", "-B", "-c", child_source(), *(str(n) for n in numbers)]


def timed_out(limits: SandboxLimits, stdout: bytearray, backend: str) -> SandboxResult:
    return SandboxResult(
        ok=False, error=f"timed out after {limits.wall_s:g}s", stdout=text(stdout), backend=backend
    )


def outcome(
    result: bytearray,
    status: int | None,
    killed_by: int | None,
    stdout: bytearray,
    limits: SandboxLimits,
    backend: str,
) -> SandboxResult:
    """Translate what the child left into a result. A refused operation is an error whatever
    else is there; a value counts only from a child that exited 0 with one result line."""
    lines = bytes(result).splitlines()
    refusals = [line for line in lines if line.startswith(REFUSED.encode())]
    printed = text(stdout)
    if refusals or status == REFUSED_STATUS:
        error = (
            refusals[0][len(REFUSED) :].decode(errors="replace")
            if refusals
            else "forbidden: an operation was refused (its report did not arrive)"
        )
        return SandboxResult(ok=False, error=error[:500], stdout=printed, backend=backend)
    reply = _reply(lines[0]) if len(lines) == 1 and status == 0 else None
    if reply is not None:
        return SandboxResult(
            ok=reply["ok"],
            value=reply.get("value"),
            error=reply.get("error", ""),
            stdout=printed,
            backend=backend,
        )
    if len(result) > RESULT_LIMIT:
        error = f"the return value is larger than {RESULT_LIMIT // 1024 // 1024} MB"
    elif status == 0 and len(lines) > 1:
        error = "the checker wrote to the result channel itself"
    elif killed_by in (signal.SIGXCPU, signal.SIGKILL):
        error = f"CPU time limit of {limits.cpu_s}s exceeded"
    elif killed_by == signal.SIGXFSZ:
        error = f"file size limit of {limits.file_mb} MB exceeded"
    elif killed_by is not None:
        error = f"killed by signal {killed_by} ({signal.strsignal(killed_by)})"
    else:
        words = result.decode(errors="replace").strip().splitlines()
        error = f"the checker process exited with status {status} without a result"
        if words:
            error += f": {words[-1][:300]}"
    return SandboxResult(ok=False, error=error, stdout=printed, backend=backend)


def _reply(line: bytes) -> dict[str, Any] | None:
    try:
        reply = json.loads(line)
    except ValueError:
        return None
    if (
        isinstance(reply, dict)
        and isinstance(reply.get("ok"), bool)
        and isinstance(reply.get("error", ""), str)
    ):
        return reply
    return None


def text(output: bytearray) -> str:
    """The checker's output as text, truncated to `STDOUT_LIMIT` bytes."""
    shown = output[:STDOUT_LIMIT].decode(errors="replace")
    return shown + "\n[output truncated]" if len(output) > STDOUT_LIMIT else shown

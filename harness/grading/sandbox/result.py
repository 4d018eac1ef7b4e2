"""What every sandbox backend shares: the limits of one checker call, the sandbox program's
command line, and reading its supervisor's report into a `SandboxResult`."""

from __future__ import annotations

import functools
import json
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.grading.sandbox.checker import RESULT_LIMIT

MAX_TIMEOUT_S = 300  # a checker reads one transcript: more than this is a mistake
MAX_MEMORY_MB = 4096
WORKDIR = "/sandbox"  # the checker's working folder inside a container or namespace
WORKDIR_MB = 32  # its size there (a tmpfs)
STDOUT_LIMIT = 4096  # bytes of the checker's output kept
REPORT_LIMIT = 2 * RESULT_LIMIT  # bytes of the supervisor's report accepted (a result, escaped)
PROCESS_CAP = 16  # processes of a whole sandbox under a cgroup (the checker's are never needed)
RLIMIT_PROCESSES = 4  # without a cgroup: the checker's processes, each with 1/4 of the memory


@dataclass(frozen=True)
class SandboxLimits:
    """What one checker call may use; the defaults suit code that reads a transcript."""

    wall_s: float = 10.0  # wall-clock timeout, interpreter start included
    cpu_s: int = 5  # RLIMIT_CPU
    memory_mb: int = 512  # RLIMIT_AS (address space)
    file_mb: int = 1  # RLIMIT_FSIZE: the largest file the checker may write
    open_files: int = 64  # RLIMIT_NOFILE
    file_writes: int = 100  # opens for writing, mkdir, rename...: with file_mb, bounds disk use
    audit_hook: bool = True  # False only to show that the OS boundary holds without it (tests)

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
    # How the machine ran it, not what the checker did (so not compared): how the whole
    # sandbox was bounded ("cgroup v2", "cgroup v1", "rlimit"...) and its peak memory in MB,
    # when a cgroup measured it.
    limits: str = field(default="", compare=False)
    memory_peak_mb: float | None = field(default=None, compare=False)


@functools.cache
def child_source() -> str:
    """The sandbox program: `checker.py`'s source, then `supervisor.py`'s (which runs it), as
    one program kept under 450 lines a file."""
    folder = Path(__file__).parent
    return (folder / "checker.py").read_text() + "\n\n" + (folder / "supervisor.py").read_text()


def child_command(
    python: str, limits: SandboxLimits, memory_mb: int | None = None, processes: int = 0
) -> list[str]:
    """The sandbox program's command line; its limits travel as arguments, the payload on
    stdin. `memory_mb` is each process's share (default: all of it), `processes` the cap on the
    sandbox user's processes (0: none, a cgroup or the container bounds them)."""
    numbers = (
        limits.cpu_s,
        memory_mb or limits.memory_mb,
        limits.file_mb,
        limits.open_files,
        limits.file_writes,
        processes,
        int(limits.audit_hook),
    )
    return [python, "-I", "-S", "-B", "-c", child_source(), *(str(n) for n in numbers)]


def timed_out(limits: SandboxLimits, stdout: bytearray, backend: str) -> SandboxResult:
    return SandboxResult(
        ok=False, error=f"timed out after {limits.wall_s:g}s", stdout=text(stdout), backend=backend
    )


def outcome(
    report: bytearray, status: int | None, stdout: bytearray, backend: str
) -> SandboxResult:
    """Translate the supervisor's report into a result: its one line when it exited 0 after
    writing it, else an error saying how the sandbox ended (the checker killed the supervisor,
    bubblewrap refused to start...)."""
    lines = bytes(report).splitlines()
    printed = text(stdout)
    reply = _reply(lines[0]) if len(lines) == 1 and status == 0 else None
    if reply is not None:
        return SandboxResult(
            ok=reply["ok"],
            value=reply.get("value"),
            error=reply.get("error", "")[:500],
            stdout=printed,
            backend=backend,
        )
    if len(report) > REPORT_LIMIT:
        error = "the sandbox's report is too large"
    elif status is not None and status > 128:  # bubblewrap, docker-init: 128 + signal
        number = status - 128
        error = f"the sandbox's supervisor was killed by signal {number}"
        error += f" ({signal.strsignal(number)})"
    elif status is not None and status < 0:  # the supervisor itself (no bubblewrap)
        error = f"the sandbox's supervisor was killed by signal {-status}"
        error += f" ({signal.strsignal(-status)})"
    else:
        words = report.decode(errors="replace").strip().splitlines()
        error = f"the sandbox ended with status {status} without a report"
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

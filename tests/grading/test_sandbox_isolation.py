"""Hostile checkers under the real bubblewrap (issue 27): each is an `error` with a reason, with
the audit hook (as users run) and without it (the OS boundary, the supervisor and the cgroup
alone); nothing they start outlives the check, and the sandbox's memory as a whole stays under
its limit."""

from __future__ import annotations

import asyncio
import os
import re
import socket
from pathlib import Path

import pytest

from harness.grading.sandbox import SandboxLimits, SandboxResult, run_checker
from harness.grading.sandbox import cgroup as sandbox_cgroup
from harness.grading.sandbox.local import bwrap_available
from harness.grading.sandbox.result import WORKDIR_MB, child_source

MARK = "1234.5"  # the argument of every `sleep` a checker starts: how survivors are found
LIMITS = SandboxLimits(wall_s=20, cpu_s=5, memory_mb=512)
FORGED = '{"ok": true, "value": true}\n'

RENAMED_MODULE = f"""
import importlib.machinery, importlib.util, sys
def check(transcript):
    origin = importlib.util.find_spec("_posixsubprocess").origin
    loader = importlib.machinery.ExtensionFileLoader("x._posixsubprocess", origin)
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    sys.modules["_posixsubprocess"] = module  # subprocess now forks through the renamed copy
    import subprocess
    subprocess.Popen(["/bin/sleep", "{MARK}"])
    return True
"""
SHELL = f"""
import subprocess
def check(transcript):
    subprocess.Popen(["/bin/sh", "-c", "sleep {MARK}; echo done"], start_new_session=True)
    return True
"""
SLEEPERS = """
import os, time
def check(transcript):
    for _ in range(30):
        try:
            if os.fork() == 0:
                time.sleep(1234.5)
                os._exit(0)
        except OSError:  # the process cap
            pass
    return True
"""
MEMORY = """
import os, time
def check(transcript):
    children = []
    for _ in range(6):
        pid = os.fork()
        if pid == 0:
            try:
                held = b"x" * (400 * 1024 * 1024)  # written, so resident
                time.sleep(2)
            finally:
                os._exit(0)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)
    return True
"""
CONNECT = """
import socket
def check(transcript):
    socket.create_connection(("127.0.0.1", PORT), timeout=2).sendall(b"escaped")
    return True
"""
SIGNAL_PARENT = """
import os, signal
def check(transcript):
    signal.pidfd_send_signal(os.pidfd_open(os.getppid()), signal.SIGKILL)
    return True
"""
FORGED_FD = f"""
import os
def check(transcript):
    for fd in range(256):
        try:
            os.write(fd, {FORGED!r}.encode())
        except OSError:
            pass
    for fd in range(16):
        try:
            with open(f"/proc/{{os.getppid()}}/fd/{{fd}}", "w") as channel:
                channel.write({FORGED!r})
        except OSError:
            pass
    os._exit(0)
"""
EXIT = """
import os
def check(transcript):
    os._exit(0)
"""

# checker -> (the error with the audit hook, the error from the OS layer alone)
HOSTILE = {
    "renamed module": (
        RENAMED_MODULE,
        "forbidden: importing x._posixsubprocess",
        r"the checker left 1 process\(es\) running \(sleep\)",
    ),
    "shell": (
        SHELL,
        "forbidden: importing _posixsubprocess",
        # the shell, and its sleep unless the check ended before the shell started it (or
        # before the shell's child had become sleep)
        r"the checker left (2 process\(es\) running \((sh, )?(sh|sleep)|1 process\(es\) running "
        r"\(sh)\)",
    ),
    "30 sleepers": (
        SLEEPERS,
        "forbidden: os.fork",
        r"the checker left \d+ process\(es\) running \(python3?[.\d]*\)",
    ),
    "6 x 400 MB": (
        MEMORY,
        "forbidden: os.fork",
        r"memory limit of 544 MB for the whole sandbox exceeded( \(.*\))?",
    ),
    "connect": (
        CONNECT,
        r"forbidden: socket\.\w+",
        r"(ConnectionRefusedError|OSError): \[Errno \d+\] .*",
    ),
    "signal the parent": (
        SIGNAL_PARENT,
        r"the sandbox's supervisor was killed by signal 9 \(Killed\)",
        r"the sandbox's supervisor was killed by signal 9 \(Killed\)",
    ),
    "forged fd": (
        FORGED_FD,
        r"forbidden: writing /proc/\d+/fd/0 outside the sandbox directory",
        r"the checker exited \(status 0\) without returning",
    ),
    "exit": (
        EXIT,
        r"the checker exited \(status 0\) without returning",
        r"the checker exited \(status 0\) without returning",
    ),
}


@pytest.fixture(autouse=True)
def _bubblewrap(monkeypatch: pytest.MonkeyPatch) -> None:
    if not bwrap_available():
        pytest.skip("bubblewrap is not installed here, or may not create namespaces")
    monkeypatch.delenv("HARNESS_SANDBOX", raising=False)


def received(server: socket.socket) -> bytes:
    try:
        connection = server.accept()[0]
    except TimeoutError:
        return b""
    with connection:
        return connection.recv(100) or b"(connected)"


def run(code: str, hook: bool) -> SandboxResult:
    limits = SandboxLimits(**{**LIMITS.__dict__, "audit_hook": hook})
    return asyncio.run(run_checker(code, "check", [{}], limits, backend="bwrap"))


def survivors() -> list[str]:
    """Host processes a checker started: sleepers, and copies of the sandbox program."""
    program = child_source()[:200]
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if MARK in cmdline or program in cmdline:
            found.append(f"{entry}: {cmdline[:80]!r}")
    return found


def leftover_cgroups() -> list[str]:
    """Per-check cgroups not removed."""
    found: list[str] = []
    for controller in ("", *sandbox_cgroup.V1_CONTROLLERS):
        parent = sandbox_cgroup._parent(controller)
        if parent is not None:
            found += [str(p) for p in parent.glob(f"harness-sandbox-{os.getpid()}-*")]
    return found


@pytest.mark.parametrize("hook", [True, False], ids=["with hook", "OS layer alone"])
@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_checker_is_an_error_and_leaves_nothing(
    name: str, hook: bool, listener: socket.socket
) -> None:
    code, with_hook, alone = HOSTILE[name]
    if name == "6 x 400 MB" and not hook and not sandbox_cgroup.cgroups_writable():
        pytest.skip("no cgroup here: the per-process share is tested below")
    port = listener.getsockname()[1]
    result = run(code.replace("PORT", str(port)), hook)
    assert (result.ok, result.value, result.backend) == (False, None, "bwrap")
    assert re.fullmatch(with_hook if hook else alone, result.error), result.error
    assert survivors() == []
    assert leftover_cgroups() == []
    assert received(listener) == b""
    if result.limits.startswith("cgroup"):
        assert result.memory_peak_mb is not None
        assert result.memory_peak_mb <= LIMITS.memory_mb + WORKDIR_MB


def test_the_verdict_names_how_the_limits_held() -> None:
    result = run("def check(transcript):\n    return True", hook=True)
    assert (result.ok, result.value) == (True, True)
    expected = f"cgroup {sandbox_cgroup.cgroups_writable()}"
    assert result.limits == (expected if sandbox_cgroup.cgroups_writable() else "rlimit")


def test_without_a_cgroup_the_memory_is_shared_out_among_a_few_processes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where no cgroup can be made: at most 4 processes for the checker, 128 MB each of 512
    (the kernel does not count root's processes against RLIMIT_NPROC: as root, the cap is
    the cgroup's only; leftovers are an error either way)."""
    monkeypatch.setattr(sandbox_cgroup, "cgroups_writable", lambda: None)
    result = run(MEMORY, hook=False)
    assert result.limits == "rlimit"
    # The children cannot hold 400 MB each: their MemoryError ends them, and the checker's
    # return is taken (a process that ended is no harm; the hook refuses the fork for users).
    assert (result.ok, result.value) == (True, True)
    sleepers = run(SLEEPERS, hook=False)
    left = re.fullmatch(r"the checker left (\d+) process\(es\) running \(.*\)", sleepers.error)
    assert left is not None, sleepers.error
    assert int(left[1]) <= (30 if os.geteuid() == 0 else 3)
    assert survivors() == []


def test_a_checker_that_returns_after_forging_is_still_only_its_value() -> None:
    """Lines the checker writes on its own channel before returning make the check an error."""
    code = FORGED_FD.replace("    os._exit(0)\n", "    return False\n")
    result = run(code, hook=False)
    assert (result.ok, result.error) == (False, "the checker wrote to its result channel itself")


def test_the_supervisor_cannot_be_opened_through_proc() -> None:
    """Its descriptors (the channel to the harness) and memory are out of the checker's reach,
    though both run as the same user."""
    code = """
import os
def check(transcript):
    found = []
    for path in ("fd/2", "fd/3", "mem", "environ"):
        try:
            open(f"/proc/{os.getppid()}/{path}", "rb").close()
            found.append("opened")
        except OSError as exc:
            found.append(type(exc).__name__)
    return True, " ".join(found)
"""
    result = run(code, hook=False)
    assert (result.ok, result.value) == (True, [True, " ".join(["PermissionError"] * 4)])

"""The two sandbox backends that run the sandbox program as a local process.

- `bwrap` (bubblewrap): new user, PID, IPC, UTS, network and cgroup namespaces, uid `nobody`, no
  capabilities, a new session, killed with the harness, a read-only root that holds only the
  system's libraries and the interpreter (no /etc, no home, no results store, no /proc of the
  host: a /proc of its own PID namespace), a private tmpfs as the only writable folder, an empty
  environment; plus the program's supervisor, rlimits and audit hook.
- `subprocess` (`--unsafe-checkers` only): no boundary but the rlimits and the audit hook
  (which libc calls go around): `python -I -S -B` with an empty environment in a fresh temporary
  directory, in its own session so that the whole process group is killed on the wall timeout.

Either runs in a cgroup of its own where this machine lets the harness make one
(`sandbox_cgroup`): memory (the checker's plus its working folder), processes and CPU are then
bounded for the sandbox as a whole, and whatever is left in it is killed at the end. Elsewhere
the bounds are rlimits: under bubblewrap at most `RLIMIT_PROCESSES` processes for the checker
(RLIMIT_NPROC counts the processes of the sandbox's own user namespace), each with that share of
the memory; under `subprocess` per process only. The result names which (`SandboxResult.limits`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile

from harness.grading import sandbox_cgroup
from harness.grading.sandbox_result import (
    PROCESS_CAP,
    REPORT_LIMIT,
    RLIMIT_PROCESSES,
    STDOUT_LIMIT,
    WORKDIR,
    WORKDIR_MB,
    SandboxLimits,
    SandboxResult,
    child_command,
    outcome,
    timed_out,
)

SYSTEM_TREES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
NOBODY = "65534"


@functools.cache
def _bwrap_options() -> frozenset[str]:
    """The options this bubblewrap knows (`--size` and `--disable-userns` are recent)."""
    try:
        done = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(word for word in done.stdout.split() if word.startswith("--"))


def interpreter() -> str:
    """The real path of this interpreter (what the sandbox mounts and runs)."""
    return os.path.realpath(sys.executable)


def _interpreter_trees() -> list[str]:
    """The folders the interpreter runs from, when they are outside the system's trees."""
    trees = {
        os.path.realpath(path)
        for path in (sys.base_prefix, sys.base_exec_prefix, os.path.dirname(interpreter()))
    }
    system = tuple(tree + "/" for tree in SYSTEM_TREES)
    return sorted(tree for tree in trees if not (tree + "/").startswith(system) and tree != "/")


def bwrap_policy() -> list[str]:
    """The bubblewrap command line that any program run under it follows (the policy, in one
    place): namespaces, uid nobody, no capabilities, an empty environment, read-only system
    trees and interpreter, the host's nothing else, a private tmpfs as working folder."""
    known = _bwrap_options()
    command = ["bwrap", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    command += ["--unshare-net", "--unshare-cgroup-try", "--uid", NOBODY, "--gid", NOBODY]
    command += ["--hostname", "sandbox", "--die-with-parent", "--new-session", "--cap-drop"]
    command += ["ALL", "--clearenv", "--setenv", "TMPDIR", WORKDIR]
    if "--disable-userns" in known:
        command.append("--disable-userns")
    for tree in SYSTEM_TREES:
        if os.path.islink(tree):
            command += ["--symlink", os.readlink(tree), tree]
        elif os.path.isdir(tree):
            command += ["--ro-bind", tree, tree]
    for tree in _interpreter_trees():
        command += ["--ro-bind", tree, tree]
    command += ["--proc", "/proc", "--dev", "/dev"]
    if "--size" in known:
        command += ["--size", str(WORKDIR_MB * 1024 * 1024)]
    return [*command, "--tmpfs", WORKDIR, "--chdir", WORKDIR, "--remount-ro", "/"]


@functools.cache
def bwrap_available() -> bool:
    """Whether bubblewrap is installed and may create the namespaces here (a container without
    user namespaces refuses); tried once per process with a child that does nothing."""
    if shutil.which("bwrap") is None:
        return False
    probe = [*bwrap_policy(), interpreter(), "-I", "-S", "-c", "pass"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=20, env={})
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def sandbox_command(
    limits: SandboxLimits, backend: str, cgroup: sandbox_cgroup.Cgroup | None
) -> tuple[list[str], str]:
    """The sandbox program's command line for a backend, and how its limits hold."""
    if cgroup is not None:
        program, how = child_command(interpreter(), limits), cgroup.label
    elif backend == "bwrap":  # init and the supervisor are the user's first two processes
        share = max(limits.memory_mb // RLIMIT_PROCESSES, 1)
        program = child_command(interpreter(), limits, share, 2 + RLIMIT_PROCESSES)
        how = "rlimit"
    else:
        program, how = child_command(sys.executable, limits), "rlimit per process"
    command = [*bwrap_policy(), *program] if backend == "bwrap" else program
    return (cgroup.enter(command) if cgroup is not None else command), how


async def run_local(payload: bytes, limits: SandboxLimits, backend: str) -> SandboxResult:
    """Run the sandbox program under bubblewrap (`backend="bwrap"`) or as a plain subprocess,
    in a cgroup of its own when one can be made."""
    cgroup = None
    if sandbox_cgroup.cgroups_writable():
        memory = (limits.memory_mb + WORKDIR_MB) * 1024 * 1024
        cgroup = await asyncio.to_thread(sandbox_cgroup.create, memory, PROCESS_CAP)
    workdir = None if backend == "bwrap" else tempfile.mkdtemp(prefix="harness-sandbox-")
    command, how = sandbox_command(limits, backend, cgroup)
    stdout, report = bytearray(), bytearray()
    left, peak, oom = 0, None, 0
    try:
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,  # the supervisor's report
            cwd=workdir,
            env={} if workdir is None else {"TMPDIR": workdir},  # nothing of the harness's
            start_new_session=True,  # its own process group, killed as a whole
        )
        try:
            await asyncio.wait_for(
                asyncio.gather(
                    _feed(process.stdin, payload),
                    _drain(process.stdout, stdout, STDOUT_LIMIT),
                    _drain(process.stderr, report, REPORT_LIMIT),
                    process.wait(),
                ),
                limits.wall_s,
            )
        except TimeoutError:
            timeout = timed_out(limits, stdout, backend)
        else:
            timeout = None
        finally:
            if process.returncode is None:
                # A session leader cannot leave its process group, so this reaches all of it
                # (under bubblewrap, its death takes the namespace's processes with it).
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
    finally:
        if cgroup is not None:
            peak, oom = cgroup.memory_peak_mb(), cgroup.oom_kills()
            left = await asyncio.to_thread(cgroup.close)
        if workdir is not None:
            _remove_tree(workdir)
    found = timeout or outcome(report, process.returncode, stdout, backend)
    if oom:  # a process of the sandbox was killed for it: no value stands
        total = limits.memory_mb + WORKDIR_MB
        error = f"memory limit of {total} MB for the whole sandbox exceeded"
        error += f" ({found.error})" if found.error else ""
        found = dataclasses.replace(found, ok=False, value=None, error=error)
    elif left:  # the namespace's end should have taken them: never trust a value
        error = f"{left} process(es) outlived the sandbox"
        found = dataclasses.replace(found, ok=False, value=None, error=error)
    return dataclasses.replace(found, limits=how, memory_peak_mb=peak)


async def _feed(stream: asyncio.StreamWriter | None, payload: bytes) -> None:
    """Send the payload line, then end of file."""
    assert stream is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # it died first
        stream.write(payload)
        await stream.drain()
        stream.close()


async def _drain(stream: asyncio.StreamReader | None, buffer: bytearray, limit: int) -> None:
    """Read to the end, keeping `limit` bytes and one more to tell that there was more."""
    assert stream is not None
    while chunk := await stream.read(65536):
        buffer += chunk[: limit + 1 - len(buffer)]


def _remove_tree(path: str) -> None:
    """Delete a sandbox directory, first making each directory in it accessible again: the
    checker may have made one unreadable, and its entries could not be removed."""
    for root, dirs, _files in os.walk(path):
        for name in dirs:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(root, name), 0o700)
    shutil.rmtree(path, ignore_errors=True)

"""The two sandbox backends that run the child as a local process.

- `bwrap` (bubblewrap): new user, PID, IPC, UTS, network and cgroup namespaces, uid `nobody`, no
  capabilities, a read-only root that holds only the system's libraries and the interpreter (no
  /etc, no home, no results store, no /proc of the host), a private tmpfs as working folder, an
  empty environment; plus the child's rlimits and audit hook.
- `subprocess`: the last resort, no boundary but the rlimits and the audit hook (which libc
  calls go around): `python -I -S -B` with an empty environment in a fresh temporary directory,
  in its own session so that the whole process group is killed on the wall timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile

from harness.grading.sandbox_result import (
    RESULT_LIMIT,
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


def bwrap_command(limits: SandboxLimits) -> list[str]:
    """The child under bubblewrap."""
    return [*bwrap_policy(), *child_command(interpreter(), limits)]


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


async def run_local(payload: bytes, limits: SandboxLimits, backend: str) -> SandboxResult:
    """Run the child under bubblewrap (`backend="bwrap"`) or as a plain subprocess."""
    workdir = None if backend == "bwrap" else tempfile.mkdtemp(prefix="harness-sandbox-")
    local = child_command(sys.executable, limits)
    command = bwrap_command(limits) if workdir is None else local
    stdout, result = bytearray(), bytearray()
    try:
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,  # the result channel
            cwd=workdir,
            env={} if workdir is None else {"TMPDIR": workdir},  # nothing of the harness's
            start_new_session=True,  # its own process group, killed as a whole
        )
        try:
            await asyncio.wait_for(
                asyncio.gather(
                    _feed(process.stdin, payload),
                    _drain(process.stdout, stdout, STDOUT_LIMIT),
                    _drain(process.stderr, result, RESULT_LIMIT),
                    process.wait(),
                ),
                limits.wall_s,
            )
        except TimeoutError:
            return timed_out(limits, stdout, backend)
        finally:
            if process.returncode is None:
                # A session leader cannot leave its process group, so this reaches all of it
                # (under bubblewrap, its death takes the namespace's processes with it).
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
    finally:
        if workdir is not None:
            _remove_tree(workdir)
    status = process.returncode
    if backend == "bwrap":  # bubblewrap reports its child's death by signal N as 128 + N
        killed_by = status - 128 if status is not None and status > 128 else None
    else:
        killed_by = -status if status is not None and status < 0 else None
    return outcome(result, status, killed_by, stdout, limits, backend)


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

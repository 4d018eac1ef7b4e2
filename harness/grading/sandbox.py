"""Run checker code shipped with a task (VerIF style) where it cannot hurt the harness.

The code is untrusted: it must not read the harness's secrets (its environment, its files), write
outside a directory of its own, start processes, use the network or run past its limits, and
nothing it prints may pass for its result. Two backends run the same child program
(`_sandbox_child.py`, which sets the resource limits, installs an audit hook and calls the
checker, then writes the JSON result on a channel of its own):

- Docker, when an engine answers: a container with no network, a read-only root filesystem, a
  small tmpfs as working directory, memory, CPU and process limits, no capabilities, no
  environment passed, removed when it ends.
- A subprocess otherwise: `python -I -S -B` with an empty environment, in a fresh temporary
  directory, in its own session so that the whole process group is killed on the wall timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DOCKER_IMAGE = "python:3.11-slim"
DOCKER_PING_TIMEOUT_S = 2
DOCKER_TMPFS_MB = 32  # the container's working directory
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


@dataclass(frozen=True)
class SandboxResult:
    """What one checker call came to: its value, or one line saying why there is none."""

    ok: bool  # the function returned
    value: Any = None  # its return value, JSON-decoded (tuples arrive as lists)
    error: str = ""  # one line: why it did not return
    stdout: str = ""  # what the checker printed (stdout and stderr), truncated
    backend: str = ""  # "docker" or "subprocess"


async def run_checker(
    code: str,
    function: str,
    args: list[Any],
    limits: SandboxLimits = SandboxLimits(),
    *,
    image: str = DOCKER_IMAGE,
) -> SandboxResult:
    """Define `code`, call `function(*args)` (args are JSON data), return its JSON result.

    Whatever the checker does comes back as a result, never as an exception; `image` is the
    Docker image, used when an engine answers.
    """
    payload = json.dumps({"code": code, "function": function, "args": args}).encode() + b"\n"
    if await asyncio.to_thread(docker_available):
        return await asyncio.to_thread(_run_docker, payload, limits, image)
    return await _run_subprocess(payload, limits)


@functools.cache
def docker_available() -> bool:
    """Whether a Docker engine answers a ping; asked once per process."""
    try:
        import docker

        docker.from_env(timeout=DOCKER_PING_TIMEOUT_S).ping()
    except Exception:  # no package, no socket, no daemon, refused: all mean no Docker
        return False
    return True


def docker_container_config(limits: SandboxLimits, image: str = DOCKER_IMAGE) -> dict[str, Any]:
    """Keyword arguments for `client.containers.create`: the container policy, in one place."""
    return {
        "image": image,
        "command": _command("python", limits),
        "stdin_open": True,  # the payload line
        "environment": [],  # nothing of the harness's
        "network_disabled": True,
        "network_mode": "none",
        "read_only": True,
        "working_dir": "/sandbox",
        "tmpfs": {"/sandbox": f"rw,noexec,nosuid,nodev,size={DOCKER_TMPFS_MB}m,mode=1777"},
        "user": "65534:65534",  # nobody
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        # The child's RLIMIT_AS stops the checker first, with a clear MemoryError; the cgroup
        # limit, which also counts the tmpfs, is the backstop.
        "mem_limit": f"{limits.memory_mb + DOCKER_TMPFS_MB}m",
        "memswap_limit": f"{limits.memory_mb + DOCKER_TMPFS_MB}m",
        "nano_cpus": 1_000_000_000,
        "pids_limit": 32,
        "init": True,  # the checker is not PID 1, so SIGXCPU from RLIMIT_CPU kills it
        "auto_remove": True,
    }


@functools.cache
def _child_source() -> str:
    return Path(__file__).with_name("_sandbox_child.py").read_text()


def _command(python: str, limits: SandboxLimits) -> list[str]:
    """The child's command line; its limits travel as arguments, the payload on stdin."""
    numbers = (
        limits.cpu_s,
        limits.memory_mb,
        limits.file_mb,
        limits.open_files,
        limits.file_writes,
    )
    return [python, "-I", "-S", "-B", "-c", _child_source(), *(str(n) for n in numbers)]


async def _run_subprocess(payload: bytes, limits: SandboxLimits) -> SandboxResult:
    """The subprocess backend: the child in a fresh directory, removed afterwards."""
    workdir = tempfile.mkdtemp(prefix="harness-sandbox-")
    stdout, result = bytearray(), bytearray()
    try:
        process = await asyncio.create_subprocess_exec(
            *_command(sys.executable, limits),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,  # the result channel
            cwd=workdir,
            env={},
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
            return _timed_out(limits, stdout, "subprocess")
        finally:
            if process.returncode is None:
                # A session leader cannot leave its process group, so this reaches all of it.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
    finally:
        _remove_tree(workdir)
    status = process.returncode
    killed_by = -status if status is not None and status < 0 else None
    return _outcome(result, status, killed_by, stdout, limits, "subprocess")


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


def _run_docker(payload: bytes, limits: SandboxLimits, image: str) -> SandboxResult:
    """The Docker backend; blocking (the docker client is), so run_checker calls it in a thread."""
    import docker

    try:
        client = docker.from_env()
        config = docker_container_config(limits, image)
        try:
            container = client.containers.create(**config)
        except docker.errors.ImageNotFound:
            client.images.pull(image)
            container = client.containers.create(**config)
        try:
            stdout, result, timed_out = _exchange(container, payload, limits)
            try:
                status = container.wait(timeout=10)["StatusCode"]
            except docker.errors.NotFound:  # already auto-removed
                status = None
        finally:
            with contextlib.suppress(docker.errors.APIError):  # gone already, unless it failed
                container.remove(force=True)
    except (docker.errors.DockerException, OSError) as exc:  # requests' errors are OSErrors
        return SandboxResult(ok=False, error=f"docker: {exc}".splitlines()[0], backend="docker")
    if timed_out:
        return _timed_out(limits, stdout, "docker")
    # docker-init, the checker's parent, reports its death by signal N as status 128 + N.
    killed_by = status - 128 if status is not None and status > 128 else None
    return _outcome(result, status, killed_by, stdout, limits, "docker")


def _exchange(
    container: Any, payload: bytes, limits: SandboxLimits
) -> tuple[bytearray, bytearray, bool]:
    """Start the container, send the payload, read its output and result until it ends or the
    wall timeout kills it; whether it timed out comes last."""
    from docker.errors import APIError
    from docker.utils.socket import frames_iter

    stdout, result = bytearray(), bytearray()
    killed = threading.Event()

    def kill() -> None:
        killed.set()
        with contextlib.suppress(APIError):
            container.kill()

    params = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
    sock = container.attach_socket(params=params)  # before start: no output is missed
    timer = threading.Timer(limits.wall_s, kill)
    try:
        container.start()
        timer.start()
        getattr(sock, "_sock", sock).sendall(payload)
        for stream, data in frames_iter(sock, tty=False):
            buffer, limit = (stdout, STDOUT_LIMIT) if stream == 1 else (result, RESULT_LIMIT)
            buffer += data[: limit + 1 - len(buffer)]
    finally:
        timer.cancel()
        sock.close()
    return stdout, result, killed.is_set()


def _timed_out(limits: SandboxLimits, stdout: bytearray, backend: str) -> SandboxResult:
    return SandboxResult(
        ok=False,
        error=f"timed out after {limits.wall_s:g}s",
        stdout=_text(stdout),
        backend=backend,
    )


def _outcome(
    result: bytearray,
    status: int | None,
    killed_by: int | None,
    stdout: bytearray,
    limits: SandboxLimits,
    backend: str,
) -> SandboxResult:
    """Translate what the child left into a result: its JSON line, else how it ended."""
    try:
        reply = json.loads(result)
    except ValueError:
        reply = None
    if (
        isinstance(reply, dict)
        and isinstance(reply.get("ok"), bool)
        and isinstance(reply.get("error", ""), str)
    ):
        return SandboxResult(
            ok=reply["ok"],
            value=reply.get("value"),
            error=reply.get("error", ""),
            stdout=_text(stdout),
            backend=backend,
        )
    if len(result) > RESULT_LIMIT:
        error = f"the return value is larger than {RESULT_LIMIT // 1024 // 1024} MB"
    elif killed_by in (signal.SIGXCPU, signal.SIGKILL):
        error = f"CPU time limit of {limits.cpu_s}s exceeded"
    elif killed_by == signal.SIGXFSZ:
        error = f"file size limit of {limits.file_mb} MB exceeded"
    elif killed_by is not None:
        error = f"killed by signal {killed_by} ({signal.strsignal(killed_by)})"
    else:
        lines = result.decode(errors="replace").strip().splitlines()
        error = f"the checker process exited with status {status} without a result"
        if lines:
            error += f": {lines[-1][:300]}"
    return SandboxResult(ok=False, error=error, stdout=_text(stdout), backend=backend)


def _text(output: bytearray) -> str:
    text = output[:STDOUT_LIMIT].decode(errors="replace")
    return text + "\n[output truncated]" if len(output) > STDOUT_LIMIT else text


def _remove_tree(path: str) -> None:
    """Delete a sandbox directory, first making each directory in it accessible again: the
    checker may have made one unreadable, and its entries could not be removed."""
    for root, dirs, _files in os.walk(path):
        for name in dirs:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(root, name), 0o700)
    shutil.rmtree(path, ignore_errors=True)

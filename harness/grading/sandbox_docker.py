"""The Docker sandbox backend, used when an engine answers: a container with no network, a
read-only root filesystem, a small tmpfs as working directory, memory, CPU and process limits,
no capabilities, uid `nobody`, no environment passed, removed when it ends."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
from typing import Any

from harness.grading.sandbox_result import (
    REPORT_LIMIT,
    STDOUT_LIMIT,
    WORKDIR,
    WORKDIR_MB,
    SandboxLimits,
    SandboxResult,
    child_command,
    outcome,
    timed_out,
)

DOCKER_IMAGE = "python:3.11-slim"
DOCKER_PING_TIMEOUT_S = 2


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
        "command": child_command("python", limits),
        "stdin_open": True,  # the payload line
        "environment": [f"TMPDIR={WORKDIR}"],  # nothing of the harness's
        "network_disabled": True,
        "network_mode": "none",
        "read_only": True,
        "working_dir": WORKDIR,
        "tmpfs": {WORKDIR: f"rw,noexec,nosuid,nodev,size={WORKDIR_MB}m,mode=1777"},
        "user": "65534:65534",  # nobody
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        # The child's RLIMIT_AS stops the checker first, with a clear MemoryError; the cgroup
        # limit, which also counts the tmpfs, is the backstop.
        "mem_limit": f"{limits.memory_mb + WORKDIR_MB}m",
        "memswap_limit": f"{limits.memory_mb + WORKDIR_MB}m",
        "nano_cpus": 1_000_000_000,
        "pids_limit": 32,
        "init": True,  # the checker is not PID 1, so SIGXCPU from RLIMIT_CPU kills it
        "auto_remove": True,
    }


def run_docker(payload: bytes, limits: SandboxLimits, image: str) -> SandboxResult:
    """The Docker backend; blocking (the docker client is), so `run_checker` calls it in a
    thread. Not run in this project's tests (no engine there): kept simple, its policy tested."""
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
            stdout, result, expired = _exchange(container, payload, limits)
            try:
                status = container.wait(timeout=10)["StatusCode"]
            except docker.errors.NotFound:  # already auto-removed
                status = None
        finally:
            with contextlib.suppress(docker.errors.APIError):  # gone already, unless it failed
                container.remove(force=True)
    except (docker.errors.DockerException, OSError) as exc:  # requests' errors are OSErrors
        return SandboxResult(ok=False, error=f"docker: {exc}".splitlines()[0], backend="docker")
    if expired:
        return timed_out(limits, stdout, "docker")
    # docker-init, the supervisor's parent, reports its death by signal N as status 128 + N.
    return dataclasses.replace(outcome(result, status, stdout, "docker"), limits="docker")


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
            buffer, limit = (stdout, STDOUT_LIMIT) if stream == 1 else (result, REPORT_LIMIT)
            buffer += data[: limit + 1 - len(buffer)]
    finally:
        timer.cancel()
        sock.close()
    return stdout, result, killed.is_set()

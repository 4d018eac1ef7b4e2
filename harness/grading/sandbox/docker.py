"""The Docker sandbox backend, used when an engine answers: a container with no network, a
read-only root filesystem, a small tmpfs as working directory, memory, CPU and process limits
(`PROCESS_CAP`, 16, as under a cgroup), no capabilities, uid `nobody`, no environment passed,
removed when it ends.

Its end does not depend on the harness: the engine enforces the wall timeout (the container's
entrypoint is coreutils' `timeout`, which kills the sandbox program's whole process group
`DOCKER_TIMEOUT_GRACE_S` after the check's `wall_s`; the harness's own timer, at `wall_s`,
normally acts first and reports the timeout), `docker stop` kills at once (`stop_signal`
SIGKILL) and the engine removes the container when it ends (`auto_remove`): a container
outlives a killed harness by that timeout at most, then is gone. Containers carry the labels
`harness.sandbox` and `harness.owner` (host:pid); one created by a harness killed before it
started it is removed by the next harness process on the host (`_remove_leftovers`).

The image is pinned by digest (`name@sha256:<64 hex>`), never pulled by tag alone: a tag can be
moved to other content. `DOCKER_IMAGE` is the official `python:3.11-slim` image at one digest
(its `python` runs the sandbox program, `supervisor.py`, so it stays at a Python the
harness supports; and it must have coreutils' `timeout`); `HARNESS_SANDBOX_IMAGE` replaces it,
and must be pinned too (else a command exits 2 at its start: `sandbox_env_problem`; a check
given an unpinned image is an error). To pin another image or a newer digest:
`docker pull python:3.11-slim`, then
`docker inspect --format '{{index .RepoDigests 0}}' python:3.11-slim`
(or `docker buildx imagetools inspect python:3.11-slim` for the multi-platform index's digest).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
import socket
import threading
from typing import Any

from harness.grading.sandbox.cgroup import process_gone
from harness.grading.sandbox.result import (
    PROCESS_CAP,
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

# The official python:3.11-slim image (its multi-platform index), pinned: see above.
DOCKER_IMAGE = (
    "python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7"
)
IMAGE_ENV = "HARNESS_SANDBOX_IMAGE"
PINNED = re.compile(r"[^@\s]+@sha256:[0-9a-f]{64}")
DOCKER_PING_TIMEOUT_S = 2
DOCKER_TIMEOUT_GRACE_S = 2  # the engine's timeout backs the harness's up, after this margin
LABEL = "harness.sandbox"
OWNER_LABEL = "harness.owner"


def docker_image() -> str:
    """The image checks run in: `HARNESS_SANDBOX_IMAGE`, else `DOCKER_IMAGE`."""
    return os.environ.get(IMAGE_ENV, "").strip() or DOCKER_IMAGE


def image_problem(image: str) -> str | None:
    """Why an image may not be used (it is not pinned by digest), or None."""
    if PINNED.fullmatch(image):
        return None
    return (
        f"the sandbox image {image!r} is not pinned by digest: use a reference of the form "
        "name@sha256:<64 hex digits> (docker inspect --format '{{index .RepoDigests 0}}' IMAGE)"
    )


def owner() -> str:
    """This harness process, as the label of the containers it starts."""
    return f"{socket.gethostname()}:{os.getpid()}"


DEFAULT_SOCKET = "/var/run/docker.sock"  # docker.from_env()'s engine when DOCKER_HOST is unset


@functools.cache
def docker_available() -> bool:
    """Whether a Docker engine answers a ping; asked once per process. Without `DOCKER_HOST`
    the client talks to the default socket: when there is none, no engine can answer, and the
    docker package (a tenth of a second to import) is not imported to find that out."""
    if "DOCKER_HOST" not in os.environ and not os.path.exists(DEFAULT_SOCKET):
        return False
    try:
        import docker

        docker.from_env(timeout=DOCKER_PING_TIMEOUT_S).ping()
    except Exception:  # no package, no socket, no daemon, refused: all mean no Docker
        return False
    return True


def docker_container_config(limits: SandboxLimits, image: str = DOCKER_IMAGE) -> dict[str, Any]:
    """Keyword arguments for `client.containers.create`: the container policy, in one place."""
    engine_timeout = f"{limits.wall_s + DOCKER_TIMEOUT_GRACE_S:g}"
    return {
        "image": image,
        # The engine's wall timeout: KILL to the sandbox program's process group (and to
        # `timeout` itself, so the container ends with status 137) when the harness is gone.
        "entrypoint": ["timeout", "--signal=KILL", engine_timeout],
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
        "pids_limit": PROCESS_CAP,
        "init": True,  # the checker is not PID 1, so SIGXCPU from RLIMIT_CPU kills it
        "auto_remove": True,  # the engine removes it when it ends, harness or not
        "stop_signal": "SIGKILL",  # `docker stop` (an engine shutting down) does not wait
        "labels": {LABEL: "checker", OWNER_LABEL: owner()},
    }


def run_docker(payload: bytes, limits: SandboxLimits, image: str) -> SandboxResult:
    """The Docker backend; blocking (the docker client is), so `run_checker` calls it in a
    thread. Not run in this project's tests (no engine there): kept simple, its policy tested."""
    import docker

    problem = image_problem(image)
    if problem is not None:
        return SandboxResult(ok=False, error=problem, backend="docker")
    try:
        client = docker.from_env()
        _remove_leftovers(client)
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


_cleaned = threading.Event()


def _remove_leftovers(client: Any) -> None:
    """Once per process: remove the sandbox containers of harness processes on this host that
    are gone (one killed between creating and starting its container; a started one ends and
    is removed by the engine on its own)."""
    if _cleaned.is_set():
        return
    _cleaned.set()
    import docker

    host = socket.gethostname()
    with contextlib.suppress(docker.errors.DockerException, OSError):
        for container in client.containers.list(all=True, filters={"label": LABEL}):
            name, _, pid = container.labels.get(OWNER_LABEL, "").rpartition(":")
            if name == host and pid.isdigit() and process_gone(int(pid)):
                with contextlib.suppress(docker.errors.APIError):
                    container.remove(force=True)


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

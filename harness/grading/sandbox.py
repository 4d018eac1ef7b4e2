"""Run checker code shipped with a task (VerIF style) where it cannot hurt the harness.

The code is untrusted: it must not read the harness's secrets (its environment, its files), write
outside a directory of its own, start processes, use the network or run past its limits, and
nothing it prints may pass for its result. Every backend runs the same program
(`_sandbox_child.py`: a trusted supervisor that alone talks to the harness, and the checker in a
process of its own with its rlimits and an audit hook that ends it at the first refused
operation; a value counts only when the function returned and left nothing running), inside the
strongest boundary this machine has, each check in a cgroup of its own where one can be made
(`sandbox_cgroup`), named in every result:

- `docker`, when an engine answers (`sandbox_docker`);
- `bwrap`, bubblewrap namespaces, when it is installed and allowed (`sandbox_local`);
- `subprocess`, rlimits and the audit hook only: not a security boundary, so it runs only where
  the user allowed it explicitly (`--unsafe-checkers`, a grade node's `sandbox: none`, or
  `HARNESS_SANDBOX=none`); its verdicts and the run's summary say so. Without that permission
  and without OS isolation, checker code is refused (`NoSandbox`): the audit hook is an extra
  layer, never the sandbox.

`HARNESS_SANDBOX=docker|bwrap|none` chooses one (`none`: the `subprocess` backend).

Checks at once are bounded machine-wide (`Slots`), whatever their backend: a check waits for a
slot before its sandbox starts (the wait is not part of its wall timeout; it never fails for
want of one). A check holds `memory_mb` plus its working folder; the slots held at once, by
all the harness processes of this user on this machine, never hold more memory than the
budget (`MEMORY_SHARE` of the memory available when a process first runs a check:
/proc/meminfo's MemAvailable, or the limit of the harness's own cgroup where lower), nor are
there more of them than `CHECKS_PER_CPU` per CPU, nor more than this process's open-file limit
allows (each running check costs the harness `FDS_PER_CHECK` descriptors; half of
RLIMIT_NOFILE's soft limit stays for the rest of the harness). A check larger than the whole
budget runs alone. The slots are files in a folder (`HARNESS_SANDBOX_SLOTS_DIR`, default
`harness-sandbox-slots-<uid>` in the temporary folder), each locked by the process that holds
it: one that died holds none (each process measures the budget itself and takes a slot only
where the slots already held leave room in it). Where that folder cannot be used (read-only,
another user's), the bound holds within the process only. `HARNESS_SANDBOX_MEMORY_MB` and
`HARNESS_SANDBOX_CHECKS` set the budget and the number of slots instead (positive whole
numbers, read once per process: `machine_budget`; tests use them with a folder of their own).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fcntl
import functools
import importlib.util
import json
import os
import resource
import secrets
import shutil
import tempfile
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.grading import sandbox_cgroup
from harness.grading.sandbox_docker import (
    DOCKER_IMAGE,
    IMAGE_ENV,
    docker_available,
    docker_container_config,
    docker_image,
    image_problem,
    run_docker,
)
from harness.grading.sandbox_local import bwrap_available, run_local
from harness.grading.sandbox_result import (
    MAX_MEMORY_MB,
    MAX_TIMEOUT_S,
    STDOUT_LIMIT,
    WORKDIR_MB,
    SandboxLimits,
    SandboxResult,
)

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
    "machine_budget",
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
            _env_int(name)
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
    slot is free (`Slots`)."""
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


# ------------------------------------------------------------------ how many checks at once

MEMORY_SHARE = 0.8  # of the memory available, for the checks at once
CHECKS_PER_CPU = 4
FDS_PER_CHECK = 8  # the harness's descriptors for one running check (pipes, slot, spawning)
FD_RESERVE_SHARE = 0.5  # of RLIMIT_NOFILE's soft limit, left to the rest of the harness
MEMORY_ENV = "HARNESS_SANDBOX_MEMORY_MB"
CHECKS_ENV = "HARNESS_SANDBOX_CHECKS"
SLOTS_DIR_ENV = "HARNESS_SANDBOX_SLOTS_DIR"
HEAD_POLL_S = 0.02  # the first waiter looks for slots other processes freed this often
POLL_S = 0.25  # the others look whether they are first this often


@dataclass(frozen=True)
class Budget:
    """What the checks running at once may hold together, machine-wide."""

    memory_mb: int
    checks: int
    directory: str


def _env_int(name: str) -> int | None:
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{name}={value!r}: expected a positive whole number")
    return int(value)


def _available_mb() -> int:
    """MemAvailable, or the limit of this process's cgroup where lower (its checks' cgroups
    are inside it), in MB."""
    available = None
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) // 1024
    if available is None:  # not Linux: the physical memory
        with contextlib.suppress(OSError, ValueError, AttributeError):
            available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    limit = sandbox_cgroup.own_memory_limit_mb()
    found = [mb for mb in (available, limit) if mb]
    return min(found) if found else 4096


@functools.cache
def machine_budget() -> Budget:
    """The budget of this process's checks, sized once (`HARNESS_SANDBOX_MEMORY_MB`,
    `HARNESS_SANDBOX_CHECKS` and `HARNESS_SANDBOX_SLOTS_DIR` replace what is measured)."""
    memory = _env_int(MEMORY_ENV)
    if memory is None:
        memory = max(int(_available_mb() * MEMORY_SHARE), 1)
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    soft = 1 << 20 if soft == resource.RLIM_INFINITY else soft
    by_fds = max(int(soft * (1 - FD_RESERVE_SHARE)) // FDS_PER_CHECK, 1)
    by_cpus = (os.cpu_count() or 1) * CHECKS_PER_CPU
    checks = _env_int(CHECKS_ENV) or min(by_cpus, by_fds)
    default = Path(tempfile.gettempdir()) / f"harness-sandbox-slots-{os.getuid()}"
    directory = os.environ.get(SLOTS_DIR_ENV, "").strip() or str(default)
    return Budget(memory, checks, directory)


@dataclass(eq=False)
class _Waiter:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[str]
    need: int


class Slots:
    """Slots for checks, shared by the harness processes of a user on a machine.

    A slot is a file `<MB>-<pid>-<random>` in the budget's folder, held locked (flock) by its
    process for as long as its check runs; taking one happens under the folder's `lock` file,
    after counting the slots held (one whose lock can be taken belongs to a process that died,
    and is removed). Within a process, waiters are served first come, first served: a release
    hands the slot on at once; slots freed by other processes are looked for by the first
    waiter every `HEAD_POLL_S`. Works from any event loop and thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # slot name -> (MB, its file, the file's locked descriptor)
        self._held: dict[str, tuple[int, str, int]] = {}
        self._waiters: collections.deque[_Waiter] = collections.deque()

    def held(self) -> tuple[int, int]:
        """The slots this process holds, and their MB."""
        with self._lock:
            return len(self._held), sum(held[0] for held in self._held.values())

    @contextlib.asynccontextmanager
    async def hold(self, need_mb: int) -> AsyncIterator[None]:
        name = await self.acquire(need_mb)
        try:
            yield
        finally:
            self.release(name)

    async def acquire(self, need_mb: int) -> str:
        """Wait for a slot of `need_mb`; its name, to `release`."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if not self._waiters:
                name = self._take(need_mb)
                if name is not None:
                    return name
            waiter = _Waiter(loop, loop.create_future(), need_mb)
            self._waiters.append(waiter)
        try:
            while not waiter.future.done():
                first = self._waiters and self._waiters[0] is waiter
                await asyncio.wait([waiter.future], timeout=HEAD_POLL_S if first else POLL_S)
                if not waiter.future.done() and first:
                    with self._lock:
                        self._serve()
            return waiter.future.result()
        except BaseException:
            with self._lock, contextlib.suppress(ValueError):
                self._waiters.remove(waiter)
            if waiter.future.done() and not waiter.future.cancelled():
                self.release(waiter.future.result())
            else:
                waiter.future.cancel()  # a slot on its way is given back (`_deliver`)
            raise

    def release(self, name: str) -> None:
        with self._lock:
            self._give_back(name)
            self._serve()

    def _serve(self) -> None:
        """Give free slots to the waiters in order (the lock held)."""
        while self._waiters:
            waiter = self._waiters[0]
            if waiter.future.done():
                self._waiters.popleft()
                continue
            name = self._take(waiter.need)
            if name is None:
                return
            self._waiters.popleft()
            try:
                waiter.loop.call_soon_threadsafe(self._deliver, waiter.future, name)
            except RuntimeError:  # its loop is closed
                self._give_back(name)

    def _deliver(self, future: asyncio.Future[str], name: str) -> None:
        if future.done():  # cancelled meanwhile
            self.release(name)
        else:
            future.set_result(name)

    def _give_back(self, name: str) -> None:
        """Free a slot (the lock held): its file goes, then its lock."""
        held = self._held.pop(name, None)
        if held is not None and held[2] >= 0:
            with contextlib.suppress(OSError):
                os.unlink(held[1])
            os.close(held[2])

    def forget(self) -> None:
        """In a forked child: nothing held or awaited (the parent's slots stay the parent's;
        the child's copies of their locks are closed, so they end with the parent)."""
        for _mb, _path, fd in self._held.values():
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._lock = threading.Lock()
        self._held = {}
        self._waiters = collections.deque()

    def _take(self, need: int) -> str | None:
        """A slot of `need` MB when the budget has room (the lock held), else None."""
        budget = machine_budget()
        mine = sum(held[0] for held in self._held.values())
        if self._held and (len(self._held) >= budget.checks or mine + need > budget.memory_mb):
            return None
        name = f"{need}-{os.getpid()}-{secrets.token_hex(6)}"
        try:
            return self._take_shared(budget, need, mine, name)
        except OSError:  # no usable folder (read-only, another user's...): this process only
            self._held[name] = (need, "", -1)
            return name

    def _take_shared(self, budget: Budget, need: int, mine: int, name: str) -> str | None:
        """`_take` in the folder the harness processes share."""
        folder = budget.directory
        os.makedirs(folder, mode=0o700, exist_ok=True)
        if os.stat(folder).st_uid != os.getuid():  # another user could hold every slot
            raise PermissionError(f"{folder} belongs to another user")
        lock = os.open(os.path.join(folder, "lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)  # held for a listing: microseconds
            count, used = len(self._held), mine
            for entry in os.scandir(folder):
                mb, _, rest = entry.name.partition("-")
                if entry.name in self._held or not mb.isdigit() or not rest:
                    continue
                if _holder_alive(entry.path):
                    count, used = count + 1, used + int(mb)
            if count and (count >= budget.checks or used + need > budget.memory_mb):
                return None
            path = os.path.join(folder, name)
            held = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._held[name] = (need, path, held)
            return name
        finally:
            os.close(lock)


def _holder_alive(path: str) -> bool:
    """Whether a slot file is still held; one whose holder died is removed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(path)
    return False


SLOTS = Slots()
os.register_at_fork(after_in_child=SLOTS.forget)

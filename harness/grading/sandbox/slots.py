"""How many sandboxed checks run at once, machine-wide.

Checks at once are bounded machine-wide (`Slots`), whatever their backend
(`sandbox.run_checker` holds one per check): a check waits for a
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
import os
import resource
import secrets
import tempfile
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import harness.grading.sandbox.cgroup as sandbox_cgroup

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


def env_int(name: str) -> int | None:
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
    memory = env_int(MEMORY_ENV)
    if memory is None:
        memory = max(int(_available_mb() * MEMORY_SHARE), 1)
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    soft = 1 << 20 if soft == resource.RLIM_INFINITY else soft
    by_fds = max(int(soft * (1 - FD_RESERVE_SHARE)) // FDS_PER_CHECK, 1)
    by_cpus = (os.cpu_count() or 1) * CHECKS_PER_CPU
    checks = env_int(CHECKS_ENV) or min(by_cpus, by_fds)
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

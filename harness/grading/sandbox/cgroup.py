"""A cgroup per sandboxed check, so that its limits hold for all its processes together.

Per-process rlimits multiply: six children of 400 MB each stay under a 512 MB RLIMIT_AS one by
one. A cgroup bounds the memory (page cache and tmpfs included), the number of processes and the
CPU rate of everything in it, and lets the harness kill all of it at the end. One is made under
the harness's own cgroup where the tree is writable: cgroup v2 when its memory and pids
controllers can be delegated there, else the v1 `memory`, `pids` and `cpu` hierarchies (which
these machines mount read-write for root). Where neither is writable `create` returns None and
the sandbox falls back to rlimits (`local`).

The sandbox's first process joins the cgroup before it execs bubblewrap (`enter`), so nothing of
the sandbox ever runs outside it.

Each cgroup is named after the harness process that owns it
(`harness-sandbox-<pid>-<pid namespace>-<n>-<random>`). A harness killed mid-check (kill -9)
cannot remove its own, so the first process that makes cgroups afterwards
(`cgroups_writable`, once per process) removes those whose owner is gone
(`remove_leftovers`): it kills whatever still runs in them first (the unsandboxed backend's
processes outlive the harness), then removes the folders. Owners in another PID namespace are
left alone (their pids mean nothing here).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import re
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

V1_NEEDED = ("memory", "pids")  # cpu is optional: the wall timeout bounds CPU time anyway
V1_CONTROLLERS = ("memory", "pids", "cpu")
CPU_PERIOD_US = 100_000
PREFIX = "harness-sandbox-"
# harness-sandbox-<owner pid>-<its pid namespace>-<n>-<random>; names made before the namespace
# was part of them lack it
NAME = re.compile(rf"{PREFIX}(?P<pid>\d+)-(?:(?P<ns>\d+)-)?\d+-[0-9a-f]+")
_counter = itertools.count()


@dataclass(frozen=True)
class Cgroup:
    """One check's cgroup: a directory in the v2 tree, or one per v1 hierarchy."""

    version: int
    dirs: dict[str, Path]  # v2: {"": dir}; v1: controller -> dir

    @property
    def label(self) -> str:
        return f"cgroup v{self.version}"

    def _file(self, controller: str, name: str) -> Path:
        return self.dirs["" if self.version == 2 else controller] / name

    def enter(self, command: list[str]) -> list[str]:
        """`command`, started by a shell that first moves itself into the cgroup."""
        procs = [str(path / "cgroup.procs") for path in self.dirs.values()]
        script = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; '
        script += 'exec "$@"'
        return ["/bin/sh", "-c", script, "sh", *procs, "--", *command]

    def memory_peak_mb(self) -> float | None:
        """The most memory the cgroup held at once, when the kernel says."""
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        with contextlib.suppress(OSError, ValueError):
            return int(self._file("memory", name).read_text()) / 1024 / 1024
        return None

    def oom_kills(self) -> int:
        """How many processes the kernel killed for the cgroup's memory limit."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        with contextlib.suppress(OSError, ValueError):
            for line in self._file("memory", name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def pids(self) -> set[int]:
        found: set[int] = set()
        for path in self.dirs.values():
            with contextlib.suppress(OSError, ValueError):
                found |= {int(word) for word in (path / "cgroup.procs").read_text().split()}
        return found

    def close(self, grace: bool = True) -> int:
        """Kill whatever is still in the cgroup and remove it; how many processes were left.
        Those of a sandbox that just ended are given a moment to leave (`grace`): a PID
        namespace's processes are still being torn down when its first process has been
        reaped."""
        for _ in range(200 if grace else 0):
            if not self.pids():
                break
            time.sleep(0.001)
        left = self.pids()
        if self.version == 2:
            with contextlib.suppress(OSError):
                (self.dirs[""] / "cgroup.kill").write_text("1")
        for _ in range(400):
            current = self.pids()
            if not current:
                break
            for pid in current:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)
        for path in self.dirs.values():
            for _ in range(100):  # busy for a moment while the last process is released
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
        return len(left)


def _own_paths() -> dict[str, str]:
    """This process's cgroup path in each hierarchy: {"": v2 path, "memory": v1 path, ...}."""
    paths: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                paths[controller] = path
    return paths


def _mounts() -> dict[str, tuple[Path, str]]:
    """Mounted hierarchies: {"": (v2 mount point, root), "memory": (v1 mount point, root)}."""
    found: dict[str, tuple[Path, str]] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            before, _, after = line.partition(" - ")
            fields, tail = before.split(), after.split()
            if len(fields) < 5 or len(tail) < 3:
                continue
            root, point = fields[3], Path(fields[4].replace("\\040", " "))
            if tail[0] == "cgroup2":
                found.setdefault("", (point, root))
            elif tail[0] == "cgroup":
                for option in tail[2].split(","):
                    if option in V1_CONTROLLERS:
                        found.setdefault(option, (point, root))
    return found


def _parent(controller: str) -> Path | None:
    """The directory of this process's cgroup in a hierarchy, where new ones go."""
    mount, own = _mounts().get(controller), _own_paths().get(controller)
    if mount is None or own is None:
        return None
    point, root = mount
    relative = own[len(root) :] if root != "/" and own.startswith(root) else own
    parent = point / relative.lstrip("/")
    return parent if os.access(parent, os.W_OK) else None


def own_memory_limit_mb() -> int | None:
    """The memory limit of this process's own cgroup (which holds the checks' cgroups), in MB,
    where it has one."""
    for controller, name in (("", "memory.max"), ("memory", "memory.limit_in_bytes")):
        mount, own = _mounts().get(controller), _own_paths().get(controller)
        if mount is None or own is None:
            continue
        point, root = mount
        relative = own[len(root) :] if root != "/" and own.startswith(root) else own
        with contextlib.suppress(OSError, ValueError):
            limit = int((point / relative.lstrip("/") / name).read_text())
            if limit < 2**60:  # v1's "no limit" is a huge number, v2's is "max"
                return limit // 2**20
    return None


def _write(path: Path, text: str) -> bool:
    try:
        path.write_text(text)
    except OSError:
        return False
    return True


def _make_v2(name: str, memory: int, processes: int) -> Cgroup | None:
    parent = _parent("")
    if parent is None:
        return None
    with contextlib.suppress(OSError):
        enabled = (parent / "cgroup.subtree_control").read_text().split()
        if not {"memory", "pids"} <= set(enabled):
            # Refused (busy) where this process's own cgroup holds processes: v2 delegates
            # controllers only to cgroups without any.
            _write(parent / "cgroup.subtree_control", "+memory +pids +cpu")
    path = parent / name
    try:
        path.mkdir()
    except OSError:
        return None
    group = Cgroup(2, {"": path})
    if not (_write(path / "memory.max", str(memory)) and _write(path / "pids.max", str(processes))):
        group.close()
        return None
    _write(path / "memory.swap.max", "0")  # optional: no swap, one CPU
    _write(path / "cpu.max", f"{CPU_PERIOD_US} {CPU_PERIOD_US}")
    return group


def _make_v1(name: str, memory: int, processes: int) -> Cgroup | None:
    parents = {c: _parent(c) for c in V1_CONTROLLERS}
    if any(parents[c] is None for c in V1_NEEDED):
        return None
    dirs: dict[str, Path] = {}
    group = Cgroup(1, dirs)
    for controller, parent in parents.items():
        if parent is None:
            continue
        try:
            (parent / name).mkdir()
        except OSError:
            if controller in V1_NEEDED:
                group.close()
                return None
            continue
        dirs[controller] = parent / name
    settings = [
        ("memory", "memory.limit_in_bytes", str(memory), True),
        ("memory", "memory.memsw.limit_in_bytes", str(memory), False),  # no swap either
        ("memory", "memory.swappiness", "0", False),
        ("pids", "pids.max", str(processes), True),
        ("cpu", "cpu.cfs_quota_us", str(CPU_PERIOD_US), False),  # one CPU at most
    ]
    for controller, key, value, needed in settings:
        path = dirs.get(controller)
        if (path is None or not _write(path / key, value)) and needed:
            group.close()
            return None
    return group


@functools.cache
def cgroups_writable() -> str | None:
    """Which cgroup version this process can make per-check cgroups in ("v2", "v1"), if any;
    tried once per process, after removing the cgroups of harness processes killed
    mid-check."""
    remove_leftovers()
    group = create(64 * 1024 * 1024, 4)
    if group is None:
        return None
    group.close()
    return f"v{group.version}"


def create(memory_bytes: int, processes: int) -> Cgroup | None:
    """A new cgroup bounding memory (bytes, swap included), processes and CPU (one CPU), or
    None where this machine does not let this process make one."""
    name = f"{PREFIX}{os.getpid()}-{_pid_namespace()}-{next(_counter)}-{secrets.token_hex(4)}"
    return _make_v2(name, memory_bytes, processes) or _make_v1(name, memory_bytes, processes)


@functools.cache
def _pid_namespace() -> int:
    """The inode of this process's PID namespace (0 where /proc does not say)."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def process_gone(pid: int) -> bool:
    """Whether no process has this pid (in this PID namespace)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def leftovers() -> list[Cgroup]:
    """Per-check cgroups, next to the ones this process makes, whose owner process is gone."""
    found: dict[str, dict[str, Path]] = {}
    for controller in ("", *V1_CONTROLLERS):
        parent = _parent(controller)
        if parent is None:
            continue
        with contextlib.suppress(OSError):
            for path in parent.iterdir():
                match = NAME.fullmatch(path.name)
                if match is None or not path.is_dir():
                    continue
                if match["ns"] is not None and int(match["ns"]) != _pid_namespace():
                    continue
                if process_gone(int(match["pid"])):
                    found.setdefault(path.name, {})[controller] = path
    return [Cgroup(2 if "" in dirs else 1, dirs) for dirs in found.values()]


def remove_leftovers() -> int:
    """Remove the cgroups of harness processes that died mid-check, killing what still runs in
    them first; how many cgroups were removed."""
    groups = leftovers()
    for group in groups:
        group.close(grace=False)
    return len(groups)

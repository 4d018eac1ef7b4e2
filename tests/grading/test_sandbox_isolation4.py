"""Issue 39's attacks on the bubblewrap sandbox, under the real bubblewrap, with and without a
cgroup (the rlimit fallback of a locked-down CI runner): a forged pass through the namespace's
init, calls a seccomp filter denies, native code from site-packages, a zombie thread-group
leader with a running thread, and floods of /dev/shm and of inodes. Each is an `error` (or the
failure the checker itself reports) with its reason, and leaves nothing behind."""

from __future__ import annotations

import asyncio
import errno
import glob
import os
import platform
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.grading.sandbox import SandboxLimits, SandboxResult, run_checker
from harness.grading.sandbox import cgroup as sandbox_cgroup
from harness.grading.sandbox import local as sandbox_local
from harness.grading.sandbox.local import bwrap_available, seccomp_program
from harness.grading.sandbox.result import WORKDIR_MB, child_source

# Unusual numbers on the sandbox program's command line mark this file's sandboxes (other test
# runs may share the machine): its arguments are CPU_S MEMORY_MB FILE_MB OPEN_FILES FILE_WRITES.
LIMITS = SandboxLimits(wall_s=30, cpu_s=7, memory_mb=128, open_files=61, file_writes=97)
MARK = " 61 97 "
FORGED = '{"ok": true, "value": true}\n'
SYSCALLS = {  # the numbers of the calls the checkers make, by architecture
    "x86_64": {
        "exit": 60,
        "ptrace": 101,
        "keyctl": 250,
        "unshare": 272,
        "perf_event_open": 298,
        "bpf": 321,
        "io_uring_setup": 425,
        "pidfd_open": 434,
        "pidfd_getfd": 438,
        "clone": 56,
    },
    "aarch64": {
        "exit": 93,
        "ptrace": 117,
        "keyctl": 219,
        "unshare": 97,
        "perf_event_open": 241,
        "bpf": 280,
        "io_uring_setup": 425,
        "pidfd_open": 434,
        "pidfd_getfd": 438,
        "clone": 220,
    },
}
NR = SYSCALLS.get(platform.machine(), {})
CGROUPS = [True, False]


@pytest.fixture(autouse=True)
def _bubblewrap(monkeypatch: pytest.MonkeyPatch) -> None:
    if not bwrap_available():
        pytest.skip("bubblewrap is not installed here, or may not create namespaces")
    monkeypatch.delenv("HARNESS_SANDBOX", raising=False)


@pytest.fixture(params=CGROUPS, ids=["cgroup", "no cgroup"])
def cgroup(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """With this machine's per-check cgroup, and without one (the rlimit fallback)."""
    if request.param and not sandbox_cgroup.cgroups_writable():
        pytest.skip("no writable cgroup here")
    if not request.param:
        monkeypatch.setattr(sandbox_cgroup, "cgroups_writable", lambda: None)
    return request.param


def needs_syscall_numbers() -> None:
    if not NR:
        pytest.skip(f"no syscall numbers for {platform.machine()} in this test")


def run(code: str, hook: bool = False, backend: str = "bwrap", **limits: Any) -> SandboxResult:
    chosen = SandboxLimits(**{**LIMITS.__dict__, "audit_hook": hook, **limits})
    result = asyncio.run(run_checker(code, "check", [{}], chosen, backend=backend))
    assert left_behind() == []
    return result


def program(code: str) -> str:
    """Checker code with this machine's syscall numbers and the forged line filled in."""
    return code.replace("NR_TABLE", repr(NR)).replace("FORGED_LINE", repr(FORGED))


def left_behind() -> list[str]:
    """Processes of this file's sandboxes still on the host, and per-check cgroups not removed."""
    program = child_source()[:200]
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, UnicodeDecodeError):
            continue
        if program.replace("\0", " ") in cmdline and MARK in cmdline:
            found.append(f"{entry}: {cmdline[:80]!r}")
    for controller in ("", *sandbox_cgroup.V1_CONTROLLERS):
        parent = sandbox_cgroup._parent(controller)
        if parent is not None:
            found += [str(p) for p in parent.glob(f"harness-sandbox-{os.getpid()}-*")]
    return found


def expect_limits(result: SandboxResult, cgroup: bool) -> None:
    assert result.backend == "bwrap"
    assert result.limits == (f"cgroup {sandbox_cgroup.cgroups_writable()}" if cgroup else "rlimit")


# ------------------------------------------------- 1. the only exit is the checker's return value

SYSCALL_HELPERS = """
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
NR = NR_TABLE

def call(name, *args):
    ctypes.set_errno(0)
    done = libc.syscall(NR[name], *[ctypes.c_long(a) for a in args])
    return done if done >= 0 else -ctypes.get_errno()
"""

FORGE = (
    SYSCALL_HELPERS
    + """
FORGED = FORGED_LINE

def forge(pid):
    '''Every way into a process's descriptors: its /proc entries and pidfd_getfd, writing a
    verdict line to each and the 8 bytes that make bubblewrap's monitor exit 0 to an eventfd.'''
    tried = {}
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError as exc:
        names = [str(n) for n in range(16)]
        tried["list"] = type(exc).__name__
    for name in names:
        try:
            with open(f"/proc/{pid}/fd/{name}", "w") as channel:
                channel.write(FORGED)
            tried[f"open {name}"] = "wrote"
        except OSError as exc:
            tried[f"open {name}"] = type(exc).__name__
    pidfd = call("pidfd_open", pid, 0)
    tried["pidfd_open"] = "opened" if pidfd >= 0 else errno_name(-pidfd)
    for fd in range(16):
        copy = call("pidfd_getfd", pidfd, fd, 0) if pidfd >= 0 else -9
        if copy >= 0:
            for data in (FORGED.encode(), (1).to_bytes(8, "little")):
                try:
                    os.write(copy, data)
                except OSError:
                    pass
            tried[f"getfd {fd}"] = "copied"
        elif copy != -9:
            tried[f"getfd {fd}"] = errno_name(-copy)
    return tried

def errno_name(number):
    import errno
    return errno.errorcode.get(number, str(number))
"""
)


def test_a_checker_cannot_reach_the_namespaces_init_or_its_supervisor(cgroup: bool) -> None:
    """What a checker gets when it goes for pid 1 (the init: it holds nothing but /dev/null,
    and is undumpable) and for its supervisor: no descriptor, through /proc or pidfd_getfd (the
    seccomp filter), and signals to the init are dropped."""
    needs_syscall_numbers()
    code = (
        program(FORGE)
        + """
def check(transcript):
    found = {"pid": os.getpid(), "ppid": os.getppid()}
    found["init"] = forge(1)
    found["supervisor"] = forge(os.getppid())
    os.kill(1, signal.SIGKILL)  # an init takes no signal from inside its namespace
    os.kill(1, 0)
    found["ptrace"] = errno_name(-call("ptrace", 16, 1, 0, 0))  # PTRACE_ATTACH
    return found
"""
    )
    result = run(code)
    expect_limits(result, cgroup)
    assert result.ok, result.error
    found = result.value
    assert (found["pid"], found["ppid"]) == (3, 2)  # init 1, supervisor 2, checker 3
    for target in ("init", "supervisor"):
        tried = found[target]
        # Listing the descriptors' numbers is allowed; opening any of them is not.
        assert tried.pop("list", "listed") in ("listed", "PermissionError")
        assert tried.pop("pidfd_open") == "opened"
        opened = {key: value for key, value in tried.items() if key.startswith("open ")}
        copied = {key: value for key, value in tried.items() if key.startswith("getfd ")}
        assert len(opened) >= 3 and set(opened.values()) == {"PermissionError"}, opened
        assert len(copied) == 16 and set(copied.values()) == {"EPERM"}, copied
    assert found["ptrace"] == "EPERM"


def test_a_checker_that_raises_and_forges_a_pass_is_an_error(cgroup: bool) -> None:
    """Issue 39's attack: a verdict line and a "status 0" through pid 1's descriptors, the
    supervisor's, and every descriptor of its own but its result channel; then it raises."""
    needs_syscall_numbers()
    code = (
        program(FORGE)
        + """
def check(transcript):
    for pid in (1, os.getppid()):
        forge(pid)
    for fd in (0, 1, 2, *range(4, 64)):
        for data in (FORGED.encode(), (1).to_bytes(8, "little")):
            try:
                os.write(fd, data)
            except OSError:
                pass
    raise ValueError("the check failed")
"""
    )
    result = run(code)
    expect_limits(result, cgroup)
    assert (result.ok, result.value) == (False, None)
    assert result.error == "ValueError: the check failed"


# ------------------------------------------------------------------------ 2. the seccomp filter

DENIED = (
    SYSCALL_HELPERS
    + """
import threading

def check(transcript):
    buffer = ctypes.create_string_buffer(256)
    address = ctypes.addressof(buffer)
    found = {
        "io_uring_setup": call("io_uring_setup", 1, address),
        "keyctl": call("keyctl", 0, -3, 1),  # KEYCTL_GET_KEYRING_ID of the session keyring
        "ptrace attach 1": call("ptrace", 16, 1, 0, 0),
        "ptrace traceme": call("ptrace", 0, 0, 0, 0),
        "bpf": call("bpf", 0, address, 72),  # BPF_MAP_CREATE
        "perf_event_open": call("perf_event_open", address, 0, -1, -1, 0),
        "unshare": call("unshare", 0x04000000),  # CLONE_NEWUTS
        "clone newuser": call("clone", 0x10000000 | 17, 0, 0, 0, 0),  # with SIGCHLD
    }
    try:
        os.mknod("flood")
        found["mknod"] = 0
    except OSError as exc:
        found["mknod"] = -exc.errno
    thread = threading.Thread(target=lambda: None)  # threads still start (clone3: ENOSYS)
    thread.start()
    thread.join()
    status = open("/proc/self/status").read()
    found["seccomp"] = [line for line in status.splitlines() if line.startswith("Seccomp:")]
    return found
"""
)


def test_the_seccomp_filter_denies_what_no_checker_needs(cgroup: bool) -> None:
    """Each call the checker makes (through libc, below any audit hook) fails with EPERM;
    without the filter io_uring_setup and keyctl succeeded in here."""
    needs_syscall_numbers()
    assert seccomp_program() is not None  # pyseccomp and libseccomp are installed here
    result = run(program(DENIED))
    expect_limits(result, cgroup)
    assert result.ok, result.error
    found = result.value
    assert found.pop("seccomp") == ["Seccomp:\t2"]  # a filter
    assert found == dict.fromkeys(found, -errno.EPERM)
    assert len(found) == 9


def test_without_libseccomp_the_result_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where pyseccomp (or libseccomp under it) is missing, checks still run, under the other
    layers, and their `limits` say that there was no seccomp filter."""
    needs_syscall_numbers()
    monkeypatch.setitem(sys.modules, "pyseccomp", None)  # `import pyseccomp` fails
    seccomp_program.cache_clear()
    try:
        assert seccomp_program() is None
        result = run(program(DENIED))
    finally:
        seccomp_program.cache_clear()
    assert result.ok, result.error
    assert result.limits.endswith(sandbox_local.NO_SECCOMP)
    assert result.value["seccomp"] == ["Seccomp:\t0"]


# ------------------------------------------------ 3. native code only from the standard library


def site_packages_extension() -> str:
    """An extension module of an installed package: `_cffi_backend` (cffi)."""
    cffi = pytest.importorskip("_cffi_backend")
    return cffi.__file__


NATIVE = """
import importlib.machinery, importlib.util
def check(transcript):
    loader = importlib.machinery.ExtensionFileLoader("_cffi_backend", {path!r})
    spec = importlib.util.spec_from_loader("_cffi_backend", loader)
    module = importlib.util.module_from_spec(spec)  # dlopen: libc within reach
    return module.__name__
"""


@pytest.mark.parametrize("backend", ["bwrap", "subprocess"])
def test_native_code_loads_only_from_the_standard_library(backend: str) -> None:
    """The audit hook refuses an extension module from site-packages (the interpreter's own
    and the virtualenv's), under any name, and ctypes; the standard library's still load."""
    base = glob.glob(f"{sys.base_prefix}/lib/python3*/site-packages/_cffi_backend*.so")
    for path in {site_packages_extension(), *base}:
        result = run(NATIVE.format(path=path), hook=True, backend=backend)
        real = os.path.realpath(path)
        assert (result.ok, result.error) == (False, f"forbidden: loading native code from {real}")
    ctypes = run("import ctypes\ndef check(t):\n    return ctypes.CDLL(None) is not None", True)
    assert (ctypes.ok, ctypes.error) == (False, "forbidden: importing ctypes")
    stdlib = "import _json, math, zlib\ndef check(t):\n    return math.sqrt(4)"
    assert run(stdlib, hook=True, backend=backend).value == 2.0


def test_site_packages_are_not_in_the_sandbox() -> None:
    """Below the hook: the interpreter's site-packages are empty folders in there, so the
    extension is not there to load."""
    base = glob.glob(f"{sys.base_prefix}/lib/python3*/site-packages/_cffi_backend*.so")
    if not base:
        pytest.skip("cffi is not installed in the base interpreter here")
    folder = os.path.dirname(os.path.realpath(base[0]))
    code = f"import os\ndef check(t):\n    return os.listdir({folder!r})"
    assert run(code).value == []
    result = run(NATIVE.format(path=os.path.realpath(base[0])))
    assert result.ok is False
    assert re.fullmatch(r"ImportError: .*No such file or directory", result.error), result.error


# ----------------------------------------------------- 4. a zombie leader with a running thread

ZOMBIE_LEADER = (
    SYSCALL_HELPERS
    + """
import threading, time

def check(transcript):
    pid = os.fork()
    if pid == 0:
        threading.Thread(target=time.sleep, args=(1234.5,)).start()
        call("exit", 0)  # this thread only, not exit_group: the leader becomes a zombie
    for _ in range(200):
        state = open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[0]
        if state == "Z":
            break
        time.sleep(0.01)
    assert state == "Z", "the leader did not end"
    assert len(os.listdir(f"/proc/{pid}/task")) == 2, "the thread did not keep running"
    return True
"""
)


def test_a_zombie_leader_with_a_running_thread_is_a_leftover(cgroup: bool) -> None:
    needs_syscall_numbers()
    result = run(program(ZOMBIE_LEADER))
    expect_limits(result, cgroup)
    assert (result.ok, result.value) == (False, None)
    assert re.fullmatch(
        r"the checker left 1 process\(es\) running \(python3?[.\d]*\)", result.error
    )


# ---------------------------------------------------------------- 5. bounded writable mounts


def shm_files() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


FILL_SHM = """
def check(transcript):
    block = b"x" * (1024 * 1024)
    for n in range(1024):  # 1 GB in files of 1 MB, the file size limit
        with open(f"/dev/shm/harness-flood-{n}", "wb") as out:
            out.write(block)
    return True
"""


@pytest.mark.parametrize("hook", [True, False], ids=["with hook", "OS layer alone"])
def test_a_gigabyte_to_dev_shm_is_refused(cgroup: bool, hook: bool) -> None:
    before = shm_files()
    result = run(FILL_SHM, hook=hook)
    expect_limits(result, cgroup)
    expected = (
        "forbidden: writing /dev/shm/harness-flood-0 outside the sandbox directory"
        if hook
        else "OSError: [Errno 30] Read-only file system: '/dev/shm/harness-flood-0'"
    )
    assert (result.ok, result.error) == (False, expected)
    assert shm_files() - before == set()


MKNOD_FLOOD = """
import os
def check(transcript):
    refused = []
    for folder in ("/dev/shm", "/sandbox"):
        try:
            os.mknod(f"{folder}/node")
        except PermissionError:
            refused.append(folder)
    print(refused)
    for n in range(560000):
        os.mknod(f"node-{n}")
    return True
"""


@pytest.mark.parametrize("hook", [True, False], ids=["with hook", "OS layer alone"])
def test_a_mknod_flood_is_stopped(cgroup: bool, hook: bool) -> None:
    """mknod raises no audit event: the seccomp filter refuses it, before any inode is made."""
    result = run(MKNOD_FLOOD, hook=hook)
    expect_limits(result, cgroup)
    assert (result.ok, result.error) == (
        False,
        "PermissionError: [Errno 1] Operation not permitted",
    )
    assert result.stdout == "['/dev/shm', '/sandbox']\n"
    fifo = run("import os\ndef check(t):\n    os.mkfifo('pipe')\n    return True", hook=hook)
    assert fifo.error == "PermissionError: [Errno 1] Operation not permitted"


def test_every_writable_filesystem_is_size_limited() -> None:
    """The mounts a checker can write to: its working folder alone, a tmpfs of `WORKDIR_MB`
    (/dev, /dev/shm included, is read-only; /proc and the devices are no storage)."""
    code = """
def check(transcript):
    found = []
    for line in open("/proc/self/mountinfo"):
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if "rw" in fields[5].split(",") and tail[0] not in ("proc", "devpts"):
            found.append((fields[4], tail[0], tail[2]))
    return found
"""
    result = run(code)
    assert result.ok, result.error
    devices = {f"/dev/{name}" for name in ("null", "zero", "full", "random", "urandom", "tty")}
    storage = [mount for mount in result.value if mount[0] not in devices]
    assert [(point, kind) for point, kind, _ in storage] == [("/sandbox", "tmpfs")]
    assert f"size={WORKDIR_MB * 1024}k" in storage[0][2].split(",")

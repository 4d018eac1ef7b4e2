"""The two sandbox backends that run the sandbox program as a local process.

- `bwrap` (bubblewrap): new user, PID, IPC, UTS, network and cgroup namespaces, uid `nobody`, no
  capabilities, a new session, killed with the harness, a read-only root that holds only the
  system's libraries and the interpreter (no /etc, no home, no results store, no /proc of the
  host: a /proc of its own PID namespace; no site-packages: empty read-only folders stand over
  the interpreter's), a read-only /dev (its devices still work; nothing can be written in it,
  /dev/shm included), a private tmpfs of `WORKDIR_MB` as the only writable folder, an empty
  environment; plus the program's supervisor, rlimits and audit hook.
  The program runs as its PID namespace's init (`--as-pid-1`): there is no bubblewrap init in
  there whose descriptors (the harness's pipes, its exit-status eventfd) a checker could reach.
  It forks the supervisor and holds nothing but /dev/null (`supervisor.init`).
  A seccomp filter, built here once with libseccomp (`pyseccomp`) and handed to bubblewrap as BPF
  through a pipe (`--seccomp FD`), makes the calls that reach other processes or the kernel's
  less-trodden paths fail with EPERM (`DENIED_SYSCALLS`, and `clone` with a CLONE_NEW* flag;
  `clone3`, whose flags a filter cannot read, fails with ENOSYS so that the C library falls back
  to `clone`). Where pyseccomp or libseccomp is missing the sandbox runs without it and its
  result's `limits` says so (", no seccomp").
- `subprocess` (`--unsafe-checkers` only): no boundary but the rlimits and the audit hook
  (which libc calls go around): `python -I -S -B` with an empty environment in a fresh temporary
  directory, in its own session so that the whole process group is killed on the wall timeout.

Either runs in a cgroup of its own where this machine lets the harness make one
(`cgroup`): memory (the checker's plus its working folder), processes and CPU are then
bounded for the sandbox as a whole, and whatever is left in it is killed at the end. Elsewhere
the bounds are rlimits: under bubblewrap at most `RLIMIT_PROCESSES` processes for the checker
(RLIMIT_NPROC counts the processes of the sandbox's own user namespace), each with that share of
the memory; under `subprocess` per process only. The result names which (`SandboxResult.limits`).

What bounds the writable mounts under bubblewrap: /dev is read-only; the working folder's bytes
by its tmpfs size (`--size`). Its inodes (kernel memory that no size counts; bubblewrap 0.8 has
no option for tmpfs's `nr_inodes`): with a cgroup, its memory limit, which the kernel charges
inodes and dentries to; without one, the audit hook's count of file writes (`file_writes`:
every open for writing, mkdir, rename...), and the seccomp filter refuses `mknod`/`mknodat`,
which raise no audit event. Code that gets below the hook without a cgroup (the hook's bypass
would take a bug) could still create empty files until its CPU or wall time runs out; the
tmpfs, and whatever it holds, ends with the check.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import functools
import glob
import os
import shutil
import signal
import site
import subprocess
import sys
import tempfile

import harness.grading.sandbox.cgroup as sandbox_cgroup
from harness.grading.sandbox.result import (
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
# Calls no checker needs that reach other processes (ptrace, process_vm_*, pidfd_getfd: the
# supervisor is undumpable too), the kernel's keyrings, io_uring, BPF and perf, mounts and
# namespaces (the user namespace has no capabilities for them either), kernel modules and kexec,
# userfaultfd, and objects that would outlive their process inside the sandbox beyond any
# rlimit (mknod, which raises no audit event; System V shared memory, queues and semaphores,
# POSIX message queues). Also the keyrings because, when the harness runs as root, the
# sandbox's user is the host's root outside its namespace, and keyrings belong to that user.
DENIED_SYSCALLS = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "kcmp",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "unshare",
    "setns",
    "open_by_handle_at",
    "name_to_handle_at",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "userfaultfd",
    "mknod",
    "mknodat",
    "shmget",
    "msgget",
    "semget",
    "mq_open",
    "acct",
    "swapon",
    "swapoff",
    "reboot",
    "syslog",
    "quotactl",
    "lookup_dcookie",
    "personality",
)
NAMESPACE_FLAGS = (  # clone(2) flags that make a namespace (CLONE_NEWTIME is clone3's only)
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)
NO_SECCOMP = ", no seccomp"  # appended to a bubblewrap result's `limits` without the filter


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


@functools.cache
def _site_packages() -> tuple[str, ...]:
    """The folders of installed packages that the sandbox's read-only trees would hold (the
    interpreter's, the system's): hidden in there, as no checker imports from them (`-I -S`
    leaves them off its path) and their native code is none of the standard library's."""
    found = set()
    candidates = [*site.getsitepackages(), *site.getsitepackages([sys.base_prefix])]
    for pattern in ("/usr/lib/python3*/*-packages", "/usr/local/lib/python3*/*-packages"):
        candidates += glob.glob(pattern)
    mounted = [tree + "/" for tree in SYSTEM_TREES if not os.path.islink(tree)]
    mounted += [tree + "/" for tree in _interpreter_trees()]
    for path in candidates:
        real = os.path.realpath(path)
        if os.path.isdir(real) and real.startswith(tuple(mounted)):
            found.add(real)
    return tuple(sorted(found))


@functools.cache
def seccomp_program() -> bytes | None:
    """The sandbox's seccomp filter as BPF (built once per process by libseccomp): every call
    of `DENIED_SYSCALLS`, and `clone` with a namespace flag, fail with EPERM; `clone3` with
    ENOSYS (its flags are behind a pointer, which a filter cannot read: the C library then uses
    `clone`); a foreign architecture's calls (i386's `int 0x80`, x32) kill the process. None
    where pyseccomp or libseccomp is not installed."""
    try:
        import pyseccomp  # type: ignore[import-untyped]  # ctypes bindings, no stubs
    except (ImportError, OSError, RuntimeError):  # RuntimeError: pyseccomp without libseccomp
        return None
    denied = pyseccomp.ERRNO(errno.EPERM)
    program = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    with contextlib.suppress(OSError):  # libseccomp < 2.4: a killed thread instead
        program.set_attr(pyseccomp.Attr.ACT_BADARCH, pyseccomp.KILL_PROCESS)
    for name in DENIED_SYSCALLS:
        with contextlib.suppress(OSError):  # not a call of this architecture
            program.add_rule(denied, name)
    with contextlib.suppress(OSError):
        program.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
    for flag in NAMESPACE_FLAGS:
        program.add_rule(denied, "clone", pyseccomp.Arg(0, pyseccomp.MASKED_EQ, flag, flag))
    with tempfile.TemporaryFile() as out:
        program.export_bpf(out)
        out.seek(0)
        return out.read()


def _seccomp_fd() -> int | None:
    """A pipe's read end holding the filter, for `--seccomp` (bubblewrap reads and closes it);
    None without a filter."""
    program = seccomp_program()
    if program is None:
        return None
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, program)  # a few hundred bytes: well within a pipe's buffer
    except OSError:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    return read_end


def bwrap_policy(seccomp_fd: int | None = None) -> list[str]:
    """The bubblewrap command line that any program run under it follows (the policy, in one
    place): namespaces, the program as their init, uid nobody, no capabilities, an empty
    environment, read-only system trees and interpreter without site-packages, the host's
    nothing else, a read-only /dev, a private tmpfs as working folder, and the seccomp filter
    read from `seccomp_fd` (a descriptor the program inherits), if one is given."""
    known = _bwrap_options()
    command = ["bwrap", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if "--as-pid-1" in known:  # bubblewrap >= 0.3
        command.append("--as-pid-1")
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
    for folder in _site_packages():
        command += ["--tmpfs", folder, "--remount-ro", folder]
    # --dev's tmpfs has no size limit (bubblewrap 0.8 sizes --tmpfs only): read-only, it holds
    # nothing the checker writes; its device nodes are mounts of their own and still work.
    command += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"]
    if "--size" in known:
        command += ["--size", str(WORKDIR_MB * 1024 * 1024)]
    command += ["--tmpfs", WORKDIR, "--chdir", WORKDIR, "--remount-ro", "/"]
    if seccomp_fd is not None:
        command += ["--seccomp", str(seccomp_fd)]
    return command


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
    limits: SandboxLimits,
    backend: str,
    cgroup: sandbox_cgroup.Cgroup | None,
    seccomp_fd: int | None = None,
) -> tuple[list[str], str]:
    """The sandbox program's command line for a backend, and how its limits hold (bubblewrap
    without `seccomp_fd`: ", no seccomp" added)."""
    if cgroup is not None:
        program, how = child_command(interpreter(), limits), cgroup.label
    elif backend == "bwrap":  # init and the supervisor are the user's first two processes
        share = max(limits.memory_mb // RLIMIT_PROCESSES, 1)
        program = child_command(interpreter(), limits, share, 2 + RLIMIT_PROCESSES)
        how = "rlimit"
    else:
        program, how = child_command(sys.executable, limits), "rlimit per process"
    if backend == "bwrap":
        command = [*bwrap_policy(seccomp_fd), *program]
        how += NO_SECCOMP if seccomp_fd is None else ""
    else:
        command = program
    return (cgroup.enter(command) if cgroup is not None else command), how


async def run_local(payload: bytes, limits: SandboxLimits, backend: str) -> SandboxResult:
    """Run the sandbox program under bubblewrap (`backend="bwrap"`) or as a plain subprocess,
    in a cgroup of its own when one can be made."""
    cgroup = None
    if sandbox_cgroup.cgroups_writable():
        memory = (limits.memory_mb + WORKDIR_MB) * 1024 * 1024
        cgroup = await asyncio.to_thread(sandbox_cgroup.create, memory, PROCESS_CAP)
    workdir = None if backend == "bwrap" else tempfile.mkdtemp(prefix="harness-sandbox-")
    stdout, report = bytearray(), bytearray()
    left, peak, oom = 0, None, 0
    seccomp_fd = None
    try:
        if backend == "bwrap":
            if not seccomp_program.cache_info().currsize:  # built once per process
                await asyncio.to_thread(seccomp_program)
            seccomp_fd = _seccomp_fd()
        command, how = sandbox_command(limits, backend, cgroup, seccomp_fd)
        try:
            process = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,  # the supervisor's report
                cwd=workdir,
                env={} if workdir is None else {"TMPDIR": workdir},  # nothing of the harness's
                start_new_session=True,  # its own process group, killed as a whole
                pass_fds=() if seccomp_fd is None else (seccomp_fd,),  # nothing else
            )
        finally:
            if seccomp_fd is not None:  # bubblewrap has its own copy
                os.close(seccomp_fd)
        timeout: SandboxResult | None
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

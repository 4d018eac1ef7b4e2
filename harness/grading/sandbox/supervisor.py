"""The sandbox's program: a trusted supervisor, and the checker in a process of its own.

`harness.grading.sandbox` starts the source of `checker.py` followed by this file's
(`result.child_source`: one program; the import from `checker` below serves only the harness,
which imports this module) as
`python -I -S -B -c <source> CPU_S MEMORY_MB FILE_MB OPEN_FILES FILE_WRITES PROCESSES HOOK`
(isolated, standard library only as in the Docker image, no .pyc writes) in a fresh directory,
the sandbox directory, and sends one line of JSON, `{"code", "function", "args"}`, on stdin.
Kept to the standard library: the Docker backend runs it in a stock image.

Where the program is its PID namespace's init (bubblewrap's `--as-pid-1`: no init of
bubblewrap's, whose descriptors a checker could open, is in there), it first makes itself
undumpable and forks the supervisor; the init keeps nothing but /dev/null, reaps what comes to
it and exits with the supervisor's status (128 + N for signal N), so that the sandbox's exit is
the supervisor's report and status alone. Signals from inside the namespace do not reach an
init, and its end kills all that is left in the namespace.

The supervisor (`supervise`) holds the only channel to the harness (its original stderr) and
reports exactly one line there. It makes itself undumpable (no other process of the sandbox may
trace it or open its descriptors through /proc) and a child subreaper (every process the
checker starts stays its descendant), then forks the checker process, which keeps stdout and
stderr (the checker's output, to the harness's output pipe) and a pipe to the supervisor, and
nothing else. The checker process sets its limits, installs the audit hook, calls the function,
writes the result on the pipe and stops itself with SIGSTOP. The supervisor takes a value only
from a checker that stopped that way with exactly one result line on the pipe and no process
left behind (a thread group whose leader ended while a thread of it still runs counts as one);
a checker that exited, was killed, wrote a refusal or left processes running is an error with
that reason, and what it left is killed. A line the checker wrote on the pipe itself stands at
most for a value it could have returned. Under bubblewrap a seccomp filter (`local.py`) also
holds for all three processes.

This file has no `from __future__` import: in the program it follows the checker's source.
"""

import contextlib
import json
import os
import resource
import select
import signal
import sys
import time
from typing import Any

PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36  # prctl(2) options

if __name__ != "__main__":  # imported by the harness; in the program, `checker.py` precedes this
    from harness.grading.sandbox.checker import (
        MB,
        REFUSED,
        REFUSED_STATUS,
        RESULT_FD,
        RESULT_LIMIT,
        run_check,
    )


def protect_supervisor(subreaper: bool = True) -> None:
    """Undumpable: no process of the sandbox (same user) may trace the supervisor or open its
    descriptors or memory through /proc. A child subreaper: orphans of the checker's processes
    become its children, so that none escapes the count of what was left running."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    options = ((PR_SET_DUMPABLE, 0), (PR_SET_CHILD_SUBREAPER, 1))
    for option, value in options if subreaper else options[:1]:
        if libc.prctl(option, value, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), f"prctl({option}, {value}) failed")


def init() -> None:
    """As PID 1 of the sandbox's namespace: fork the supervisor, which returns from here; stay
    behind as the namespace's init, undumpable and holding nothing but /dev/null, reap every
    process that comes to it and exit with the supervisor's status (128 + N when signal N
    killed it, as bubblewrap reports it). Its end kills the namespace's other processes."""
    protect_supervisor(subreaper=False)  # the supervisor inherits it and sets it again
    supervisor = os.fork()
    if supervisor == 0:
        return
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, 1 << 16)  # the harness's pipes, the payload's copies
    status = 1 << 8
    while True:
        try:
            pid, found = os.waitpid(-1, 0)
        except ChildProcessError:  # not reached: the supervisor is reaped here first
            break
        except InterruptedError:
            continue
        if pid == supervisor:
            status = found
            break
    code = os.waitstatus_to_exitcode(status)
    os._exit(128 - code if code < 0 else code)


def start_checker(payload: dict[str, Any], numbers: list[int], hook: bool) -> tuple[int, int]:
    """Fork the checker process; its pid and the read end of its pipe. It keeps stdout and
    stderr (the checker's output) and the pipe as `RESULT_FD`, nothing of the supervisor's."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write_end)
        return pid, read_end
    try:
        os.dup2(write_end, RESULT_FD)
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.closerange(RESULT_FD + 1, 1 << 16)  # the harness's channel and the pipes' copies
        for name in [name for name in sys.modules if "ctypes" in name]:
            del sys.modules[name]  # loaded by the supervisor: the checker must import it anew
        run_check(payload, numbers, hook)
    finally:
        os._exit(1)  # run_check does not return; nothing of the supervisor's code runs here


def wait_checker(pid: int, read_end: int) -> tuple[int, bytes]:
    """Read the checker's pipe until it stops or ends; its wait status and what it wrote
    (`RESULT_LIMIT` bytes and one more at most). SIGCHLD, sent when it stops or ends, wakes
    the wait through a pipe of its own."""
    received = bytearray()
    woken, wake = os.pipe()
    for end in (read_end, woken, wake):
        os.set_blocking(end, False)
    signal.set_wakeup_fd(wake)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    watched = [read_end, woken]
    while True:
        done, status = os.waitpid(pid, os.WNOHANG | os.WUNTRACED)
        if done:
            break
        readable, _, _ = select.select(watched, [], [], 0.5)
        if read_end in readable:
            with contextlib.suppress(BlockingIOError):
                chunk = os.read(read_end, 65536)
                received += chunk[: RESULT_LIMIT + 1 - len(received)]
                if not chunk:  # every writer closed it
                    watched.remove(read_end)
        if woken in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(woken, 512)
    with contextlib.suppress(BlockingIOError, OSError):
        while chunk := os.read(read_end, 65536):  # what it wrote just before it stopped
            received += chunk[: RESULT_LIMIT + 1 - len(received)]
    if os.WIFSTOPPED(status):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return status, bytes(received)


def descendants() -> dict[int, str]:
    """The supervisor's living descendants, by pid, with their names: zombies aside, but not a
    thread group whose leader ended (a zombie, until the last thread ends) while a thread of it
    still runs."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                head, _, tail = stat.read().rpartition(b")")
        except OSError:  # it ended meanwhile
            continue
        fields = tail.split()
        if fields and (fields[0] != b"Z" or running_threads(entry)):
            parents[int(entry)] = int(fields[1])
            names[int(entry)] = head.partition(b"(")[2].decode(errors="replace")
    found, todo = {}, [os.getpid()]
    while todo:
        parent = todo.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in found:
                found[pid] = names[pid]
                todo.append(pid)
    return found


def running_threads(pid: str) -> bool:
    """Whether a zombie's thread group still has threads (the leader's task stays listed)."""
    try:
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except OSError:  # reaped meanwhile
        return False


def reap() -> None:
    """Collect every ended child (orphans of the checker's processes come to the supervisor)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def end_leftovers() -> list[str]:
    """Kill what the checker left running; the names of what was there."""
    reap()
    left = descendants()
    for _ in range(200):
        current = descendants()
        if not current:
            break
        for pid in current:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)
        reap()
    return sorted(left.values())


def verdict(status: int, received: bytes, leftovers: list[str], cpu_s: int) -> dict[str, Any]:
    """The report: the checker's reply when it returned cleanly, else why there is none."""
    lines = received.splitlines()
    refusals = [line for line in lines if line.startswith(REFUSED.encode())]
    if refusals:
        return {"ok": False, "error": refusals[0][len(REFUSED) :].decode(errors="replace")}
    if leftovers:
        shown = ", ".join(sorted(set(leftovers))[:5])
        error = f"the checker left {len(leftovers)} process(es) running ({shown})"
        return {"ok": False, "error": error}
    if os.WIFSTOPPED(status) and os.WSTOPSIG(status) == signal.SIGSTOP:
        if len(received) > RESULT_LIMIT:
            error = f"the return value is larger than {RESULT_LIMIT // MB} MB"
            return {"ok": False, "error": error}
        if len(lines) != 1:
            return {"ok": False, "error": "the checker wrote to its result channel itself"}
        return reply(lines[0])
    if os.WIFEXITED(status):
        if os.WEXITSTATUS(status) == REFUSED_STATUS:
            return {"ok": False, "error": "forbidden: an operation was refused"}
        code = os.WEXITSTATUS(status)
        return {"ok": False, "error": f"the checker exited (status {code}) without returning"}
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        if number == signal.SIGXCPU:
            return {"ok": False, "error": f"CPU time limit of {cpu_s}s exceeded"}
        if number == signal.SIGXFSZ:
            return {"ok": False, "error": "file size limit exceeded"}
        name = signal.strsignal(number)
        return {"ok": False, "error": f"the checker was killed by signal {number} ({name})"}
    number = os.WSTOPSIG(status)
    return {"ok": False, "error": f"the checker was stopped by signal {number}"}


def reply(line: bytes) -> dict[str, Any]:
    """The result line `run_check` writes, validated: `ok`, then `value` or `error`."""
    try:
        found = json.loads(line)
    except ValueError:
        found = None
    if (
        isinstance(found, dict)
        and isinstance(found.get("ok"), bool)
        and isinstance(found.get("error", ""), str)
        and set(found) <= {"ok", "value", "error"}
    ):
        return found
    return {"ok": False, "error": "the checker wrote to its result channel itself"}


def supervise() -> None:
    """The supervisor: the payload, protection, the checker, its leftovers, one report."""
    numbers = [int(arg) for arg in sys.argv[1:7]]
    hook = sys.argv[7:8] != ["0"]
    if os.getpid() == 1:  # bubblewrap's --as-pid-1: the init stays behind
        init()
    report = os.dup(2)
    os.dup2(1, 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        payload = json.loads(sys.stdin.buffer.readline())
        protect_supervisor()
        pid, read_end = start_checker(payload, numbers, hook)
        status, received = wait_checker(pid, read_end)
        found = verdict(status, received, end_leftovers(), numbers[0])
    except Exception as exc:  # the supervisor's own failure: reported, never a value
        found = {"ok": False, "error": f"sandbox supervisor: {type(exc).__name__}: {exc}"}
    data = (json.dumps(found) + "\n").encode()
    while data:
        data = data[os.write(report, data) :]
    os._exit(0)


if __name__ == "__main__":
    supervise()

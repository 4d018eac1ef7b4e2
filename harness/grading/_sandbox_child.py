"""The sandbox's child process: set limits, install the audit hook, then run the checker.

`harness.grading.sandbox` starts this file's source as
`python -I -S -B -c <source> CPU_S MEMORY_MB FILE_MB OPEN_FILES FILE_WRITES` (isolated, standard
library only as in the Docker image, no .pyc writes) in a fresh directory, the sandbox directory,
and sends one line of JSON, `{"code", "function", "args"}`, on stdin. The checker's output
(stdout and stderr) goes to stdout; the result goes to the original stderr, which the checker
does not print to, so text it echoes from a transcript cannot pass for its result. Kept to the
standard library: the Docker backend runs it in a stock image.

The hook is a tripwire, not the boundary (Docker or bubblewrap is: code below the audit events,
such as libc calls, goes around any hook). What it refuses it records: the refusal line
(`REFUSED` and the reason) goes to the result channel and the process ends at once with
`REFUSED_STATUS`, so a checker that catches the error cannot go on to return a pass. The result
line is written only after the checker returned; the parent takes a result only from a process
that exited 0 with exactly one line on the channel, so a line the checker wrote there itself
stands at most for a value it could have returned.

The audit hook lets the checker
- read the sandbox directory, the interpreter's trees (prefixes and import path), the time zone
  database, /dev/null and /dev/urandom;
- write (open for writing, mkdir, rename, remove, chmod, chown, utime, truncate, xattrs) only
  inside the sandbox directory and to /dev/null, at most FILE_WRITES times;
- open directories only in the sandbox directory, and no devices, FIFOs or sockets but the two;
- load native code only from the interpreter's trees.
It refuses everything else on paths, and process creation, signals, sockets, ctypes, changing
directory, links, changing rlimits, building code objects, garbage-collector introspection,
subinterpreters, and the extension modules that act below the audit events (REFUSED_MODULES).
A refusal is a PermissionError whose message starts with "forbidden: ".
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import sys
from collections.abc import Callable

MB = 1024 * 1024
REFUSED = "\x00refused\x00 "  # starts the line of a refused operation on the result channel
REFUSED_STATUS = 86  # the exit status after a refusal
TIME_ZONES = "/usr/share/zoneinfo"  # public data that `zoneinfo` reads
DEVICES = frozenset({"/dev/null", "/dev/urandom"})  # the only non-regular files a checker may open
WRITABLE_FILES = frozenset({"/dev/null"})  # besides the sandbox directory
READ_EVENTS = frozenset({"os.listdir", "os.scandir", "os.getxattr", "os.listxattr"})
WRITE_EVENTS = frozenset(
    {
        "os.chmod",
        "os.chown",
        "os.mkdir",
        "os.remove",
        "os.removexattr",
        "os.rename",
        "os.rmdir",
        "os.setxattr",
        "os.truncate",
        "os.utime",
    }
)
REFUSED_EVENTS = frozenset(
    {
        # processes and signals
        "os.exec",
        "os.fork",
        "os.forkpty",
        "os.kill",
        "os.killpg",
        "os.posix_spawn",
        "os.system",
        "pty.spawn",
        "subprocess.Popen",
        # ways around the path checks or the limits
        "os.chdir",  # relative paths are resolved against the sandbox directory
        "os.link",
        "os.symlink",
        "resource.prlimit",
        "resource.setrlimit",
        # ways to reach or bypass this hook
        "code.__new__",
        "cpython.PyInterpreterState_New",
        "gc.get_objects",
        "gc.get_referents",
        "gc.get_referrers",
    }
)
REFUSED_PREFIXES = ("ctypes.", "socket.", "syslog.")
# Extension modules that act on files, processes or memory below the audit events.
REFUSED_MODULES = frozenset(
    {
        "_ctypes",
        "_ctypes_test",
        "_multiprocessing",  # semaphores in /dev/shm
        "_posixshmem",  # shared memory in /dev/shm
        "_posixsubprocess",  # fork_exec raises no audit event
        "_sqlite3",  # opens and ATTACHes database files itself
        "_tkinter",  # Tcl can exec, open files and sockets
        "_xxsubinterpreters",
        "_xxtestfuzz",
        "ctypes",
        "nis",
        "ossaudiodev",
        "spwd",  # reads /etc/shadow
    }
)


def set_limits(cpu_s: int, memory_mb: int, file_mb: int, open_files: int) -> None:
    """Kernel-enforced limits, set before any checker code is in this process."""
    # SIGXCPU at the soft limit; SIGKILL one second later if the checker ignores it.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    for limit, value in (
        (resource.RLIMIT_AS, memory_mb * MB),
        (resource.RLIMIT_FSIZE, file_mb * MB),
        (resource.RLIMIT_NOFILE, open_files),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(limit, (value, value))


def readable_roots() -> tuple[str, ...]:
    """The interpreter's trees (prefixes and import path: all it needs to import the stdlib),
    and the time zone database."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sys.path}
    return tuple(sorted({os.path.realpath(path) for path in (*paths, TIME_ZONES) if path}))


def audit_hook(
    sandbox: str, roots: tuple[str, ...], file_writes: int, result_fd: int = 2
) -> Callable[[str, tuple[object, ...]], None]:
    """The hook that refuses what a checker must not do (the policy is in the module docstring).

    The checker runs in this interpreter and can rebind module attributes and builtins, and can
    reach a finished hook's local values through the traceback of a refusal. So the hook is one
    function that loads no globals and calls no other Python function: everything it uses is
    bound here, and is immutable (strings, tuples, frozensets) or a builtin function, an exact
    builtin type or one of its methods, none of which a checker can change.
    """
    readlink, stat, fs_encoding = os.readlink, os.stat, sys.getfilesystemencoding()
    item, type_of, str_type, bytes_type, int_type = tuple.__getitem__, type, str, bytes, int
    decode, forbidden, os_error = bytes.decode, PermissionError, OSError
    encode, replace, write, end = str.encode, str.replace, os.write, os._exit
    refused, refused_status = REFUSED, REFUSED_STATUS
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
    inside = sandbox + "/"
    root_prefixes = tuple(root + "/" for root in roots)
    readable = frozenset({sandbox, *roots, *DEVICES})
    readable_prefixes = (inside, *root_prefixes)
    devices, writable = DEVICES, WRITABLE_FILES
    read_events, write_events, refused_events = READ_EVENTS, WRITE_EVENTS, REFUSED_EVENTS
    refused_prefixes, refused_modules = REFUSED_PREFIXES, REFUSED_MODULES
    writes_left = file_writes

    def hook(event: str, args: tuple[object, ...]) -> None:
        nonlocal writes_left
        try:
            if event == "open":  # (path, mode, flags); the path is str, bytes or a file descriptor
                paths, access = args[:1], "write" if args[2] & write_flags else "read"
            elif event in read_events:
                paths, access = args[:1], "read"
            elif event in write_events:
                paths, access = args[:2] if event == "os.rename" else args[:1], "write"
            elif event == "import":  # (name, file of an extension module or None, ...)
                if args[0] in refused_modules or args[0].startswith("_test"):
                    raise forbidden(f"forbidden: importing {args[0]}")
                paths, access = args[1:2], "native code"
            elif event in refused_events or event.startswith(refused_prefixes):
                raise forbidden(f"forbidden: {event}")
            else:
                return
            for path in paths:
                if path is None:  # os.listdir(): the sandbox directory; import: not an extension
                    continue
                if type_of(path) is int_type:  # a descriptor of something it was allowed to open
                    if access == "write" and event != "open":
                        raise forbidden(f"forbidden: {event} on a file descriptor")
                    continue
                if type_of(path) is bytes_type:
                    path = decode(path, fs_encoding, "surrogateescape")
                elif type_of(path) is not str_type:  # a str subclass: do not call its methods
                    raise forbidden(f"forbidden: {event} with a path that is not a str")
                # Resolve like the kernel: relative to the sandbox (the working directory, which
                # cannot change), `..` and symbolic links component by component.
                todo = (path if path.startswith("/") else inside + path).split("/")
                todo.reverse()
                parts: list[str] = []
                links = 0
                while todo:
                    part = todo.pop()
                    if part == "" or part == ".":
                        continue
                    if part == "..":
                        if parts:
                            parts.pop()
                        continue
                    parts.append(part)
                    try:
                        target = readlink("/" + "/".join(parts))
                    except os_error:  # not a link, or does not exist
                        continue
                    links += 1
                    if links > 40:
                        raise forbidden(f"forbidden: too many symbolic links in {path}")
                    parts.pop()
                    if target.startswith("/"):
                        parts.clear()
                    more = target.split("/")
                    more.reverse()
                    todo += more
                real = "/" + "/".join(parts)
                if access == "write":
                    # The directory itself may be opened (tempfile does, with an opener),
                    # not changed.
                    if not (
                        real.startswith(inside)
                        or real in writable
                        or (event == "open" and real == sandbox)
                    ):
                        action = "writing" if event == "open" else event
                        raise forbidden(f"forbidden: {action} {real} outside the sandbox directory")
                    writes_left -= 1
                    if writes_left < 0:
                        raise forbidden(f"forbidden: more than {file_writes} file writes")
                elif access == "read":
                    if not (real in readable or real.startswith(readable_prefixes)):
                        raise forbidden(f"forbidden: reading {real} outside the allowed paths")
                elif not real.startswith(root_prefixes):
                    raise forbidden(f"forbidden: loading native code from {real}")
                # Descriptors of directories only in the sandbox: paths relative to one (dir_fd,
                # which the hook does not see) then still resolve inside it. And no devices.
                if event == "open":
                    try:
                        kind = item(stat(real), 0) & 0o170000
                    except os_error:  # does not exist (yet)
                        kind = 0
                    if kind == 0o040000:
                        if not (real == sandbox or real.startswith(inside)):
                            raise forbidden(f"forbidden: opening the directory {real}")
                    elif kind not in (0, 0o100000) and real not in devices:
                        raise forbidden(f"forbidden: opening {real}, which is not a regular file")
        except forbidden as exc:  # recorded where the checker cannot take it back, then the end
            line = refused + replace(exc.args[0], "\n", " ") + "\n"
            try:
                write(result_fd, encode(line, "utf-8", "surrogateescape"))
            finally:
                end(refused_status)

    return hook


def describe(exc: BaseException, memory_mb: int, file_mb: int) -> str:
    """One line saying why the checker did not return."""
    if isinstance(exc, MemoryError):
        return f"memory limit of {memory_mb} MB exceeded"
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return f"file size limit of {file_mb} MB exceeded"
    if isinstance(exc, SyntaxError):
        return f"{type(exc).__name__}: {exc.msg} (line {exc.lineno})"
    try:
        message = str(exc).strip()
    except Exception:  # the checker's own exception class may fail to print
        message = ""
    if isinstance(exc, PermissionError) and message.startswith("forbidden: "):
        line = message
    else:
        line = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return line.splitlines()[0][:500]


def call_checker(code: str, function: str, args: list[object], memory_mb: int, file_mb: int) -> str:
    """The checker's outcome as the JSON result line."""
    try:
        namespace: dict[str, object] = {"__name__": "checker"}
        exec(compile(code, "<checker>", "exec"), namespace)
        checker = namespace.get(function)
        if not callable(checker):
            error = f"no function {function!r} in the checker code"
            return json.dumps({"ok": False, "error": error})
        value = checker(*args)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt are the checker's too
        return json.dumps({"ok": False, "error": describe(exc, memory_mb, file_mb)})
    try:
        return json.dumps({"ok": True, "value": value}, allow_nan=False)
    except Exception as exc:
        error = f"the return value is not JSON-serialisable: {describe(exc, memory_mb, file_mb)}"
        return json.dumps({"ok": False, "error": error})


def main() -> None:
    """Limits first, then the result channel, the payload and the hook; the checker last."""
    cpu_s, memory_mb, file_mb, open_files, file_writes = (int(arg) for arg in sys.argv[1:6])
    set_limits(cpu_s, memory_mb, file_mb, open_files)
    result = os.fdopen(os.dup(2), "w", encoding="utf-8")
    os.dup2(1, 2)
    sys.stderr = sys.stdout
    payload = json.loads(sys.stdin.buffer.readline())
    sys.stdin.close()
    sys.addaudithook(audit_hook(os.getcwd(), readable_roots(), file_writes, result.fileno()))
    line = call_checker(payload["code"], payload["function"], payload["args"], memory_mb, file_mb)
    with contextlib.suppress(Exception):  # the checker may have closed or replaced it
        sys.stdout.flush()
    result.write(line + "\n")
    result.flush()
    os._exit(0)  # no atexit handlers or threads of the checker after the result


if __name__ == "__main__":
    main()

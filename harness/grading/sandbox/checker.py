"""The checker's side of the sandbox program: the process that sets its limits, installs the
audit hook, calls the checker's function and writes the result on its pipe to the supervisor.
The sandbox's program is this file's source followed by `supervisor.py`'s
(`result.child_source`), which describes it; kept to the standard library, as all of it is.

The hook is a tripwire, not the boundary (Docker or bubblewrap is: code below the audit events,
such as libc calls, goes around any hook). What it refuses it records: the refusal line
(`REFUSED` and the reason) goes to the pipe and the process ends at once with `REFUSED_STATUS`,
so a checker that catches the error cannot go on to return a pass.

The audit hook lets the checker
- read the sandbox directory, the interpreter's trees (prefixes and import path), the time zone
  database, /dev/null and /dev/urandom;
- write (open for writing, mkdir, rename, remove, chmod, chown, utime, truncate, xattrs) only
  inside the sandbox directory and to /dev/null, at most FILE_WRITES times;
- open directories only in the sandbox directory, and no devices, FIFOs or sockets but the two;
- load native code only from the standard library's own folder of extension modules
  (`lib-dynload` on its import path), never from site-packages or a file of its own.
It refuses everything else on paths, and process creation, signals, sockets, ctypes, changing
directory, links, changing rlimits, building code objects, garbage-collector introspection,
subinterpreters, and the extension modules that act below the audit events (REFUSED_MODULES),
under whatever name they are loaded (an extension's name ends with its own).
A refusal is a PermissionError whose message starts with "forbidden: ".
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import signal
import sys
from collections.abc import Callable
from typing import Any

MB = 1024 * 1024
RESULT_LIMIT = 1024 * 1024  # bytes of JSON result accepted
RESULT_FD = 3  # the checker process's pipe to the supervisor
REFUSED = "\x00refused\x00 "  # starts the line of a refused operation on the result channel
REFUSED_STATUS = 86  # the exit status after a refusal
TIME_ZONES = "/usr/share/zoneinfo"  # public data that `zoneinfo` reads
DYNLOAD = "lib-dynload"  # the standard library's folder of extension modules
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


def set_limits(cpu_s: int, memory_mb: int, file_mb: int, open_files: int, processes: int) -> None:
    """Kernel-enforced limits of the checker process (and of any process it starts), set before
    any checker code is in it. `processes` > 0 caps the processes of the sandbox's user
    (RLIMIT_NPROC), where no cgroup bounds the sandbox as a whole."""
    # SIGXCPU at the soft limit; SIGKILL one second later if the checker ignores it.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    limits = [
        (resource.RLIMIT_AS, memory_mb * MB),
        (resource.RLIMIT_FSIZE, file_mb * MB),
        (resource.RLIMIT_NOFILE, open_files),
        (resource.RLIMIT_CORE, 0),
    ]
    if processes > 0:
        limits.append((resource.RLIMIT_NPROC, processes))
    for limit, value in limits:
        resource.setrlimit(limit, (value, value))


def native_roots() -> tuple[str, ...]:
    """Where extension modules may be loaded from: the standard library's `lib-dynload`, as on
    the interpreter's own import path (`-I -S`: no site-packages there) and beside `os`."""
    paths = [path for path in sys.path if os.path.basename(path) == DYNLOAD]
    paths.append(os.path.join(os.path.dirname(os.__file__), DYNLOAD))
    return tuple(sorted({os.path.realpath(path) for path in paths}))


def readable_roots() -> tuple[str, ...]:
    """The interpreter's trees (prefixes and import path: all it needs to import the stdlib),
    and the time zone database."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sys.path}
    return tuple(sorted({os.path.realpath(path) for path in (*paths, TIME_ZONES) if path}))


def audit_hook(
    sandbox: str,
    roots: tuple[str, ...],
    file_writes: int,
    result_fd: int = RESULT_FD,
    native: tuple[str, ...] | None = None,
) -> Callable[[str, tuple[Any, ...]], None]:
    """The hook that refuses what a checker must not do (the policy is in the module docstring).
    `native`: the folders extension modules may come from (default: `native_roots()`).

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
    rpartition, split, startswith = str.rpartition, str.split, str.startswith
    refused, refused_status = REFUSED, REFUSED_STATUS
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
    inside = sandbox + "/"
    root_prefixes = tuple(root + "/" for root in roots)
    native_prefixes = tuple(root + "/" for root in (native_roots() if native is None else native))
    readable = frozenset({sandbox, *roots, *DEVICES})
    readable_prefixes = (inside, *root_prefixes)
    devices, writable = DEVICES, WRITABLE_FILES
    read_events, write_events, refused_events = READ_EVENTS, WRITE_EVENTS, REFUSED_EVENTS
    refused_prefixes, refused_modules = REFUSED_PREFIXES, REFUSED_MODULES
    writes_left = file_writes

    # The arguments as Any: the hook checks their types with `type_of(x) is str_type` (bound
    # names, see above), which a type checker cannot follow.
    def hook(event: str, args: tuple[Any, ...]) -> None:
        nonlocal writes_left
        try:
            if event == "open":  # (path, mode, flags); the path is str, bytes or a file descriptor
                paths, access = args[:1], "write" if args[2] & write_flags else "read"
            elif event in read_events:
                paths, access = args[:1], "read"
            elif event in write_events:
                paths, access = args[:2] if event == "os.rename" else args[:1], "write"
            elif event == "import":  # (name, file of an extension module or None, ...)
                # An extension keeps its own name as the last part of any name it is loaded
                # under (its init function is named after it), and in its file's name.
                name, file = args[0], args[1]
                last = rpartition(name, ".")[2]
                stem = ""
                if type_of(file) is str_type:
                    stem = split(rpartition(file, "/")[2], ".")[0]
                if (
                    last in refused_modules
                    or stem in refused_modules
                    or startswith(last, "_test")
                    or startswith(stem, "_test")
                ):
                    raise forbidden(f"forbidden: importing {name}")
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
                elif not real.startswith(native_prefixes):
                    raise forbidden(f"forbidden: loading native code from {real}")
                # Descriptors of directories only in the sandbox: paths relative to one (dir_fd,
                # which the hook does not see) then still resolve inside it. And no devices.
                if event == "open":
                    try:
                        # st_mode is an int; typeshed types stat_result's items as floats
                        kind = item(stat(real), 0) & 0o170000  # type: ignore[operator]
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


def run_check(payload: dict[str, Any], numbers: list[int], hook: bool) -> None:
    """The checker process (forked by the supervisor): limits, the hook, the call, the result
    on `RESULT_FD`, then SIGSTOP, which tells the supervisor that the function returned."""
    cpu_s, memory_mb, file_mb, open_files, file_writes, processes = numbers
    set_limits(cpu_s, memory_mb, file_mb, open_files, processes)
    if hook:
        sys.addaudithook(audit_hook(os.getcwd(), readable_roots(), file_writes))
    line = call_checker(payload["code"], payload["function"], payload["args"], memory_mb, file_mb)
    with contextlib.suppress(Exception):  # the checker may have closed or replaced it
        sys.stdout.flush()
    data = (line + "\n").encode()
    while data:
        data = data[os.write(RESULT_FD, data) :]
    signal.raise_signal(signal.SIGSTOP)  # the supervisor kills a stopped checker
    os._exit(0)  # not reached

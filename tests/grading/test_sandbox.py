"""The checker sandbox: results, limits, refusals, secrets, concurrency, escape attempts and the
Docker policy; every behaviour against every backend this machine has (bubblewrap here and in
CI, the audit-hook subprocess everywhere), and the bubblewrap boundary without the hook."""

from __future__ import annotations

import asyncio
import dis
import json
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from harness.grading.sandbox import (
    STDOUT_LIMIT,
    SandboxLimits,
    SandboxResult,
    available_backends,
    checker,
    choose_backend,
    docker_available,
    docker_container_config,
    run_checker,
)
from harness.grading.sandbox.local import bwrap_available, bwrap_policy, interpreter

FAST = SandboxLimits(wall_s=3, cpu_s=1)
KEY = "sk-planted-0123456789abcdef"
LOCAL_BACKENDS = ["bwrap", "subprocess"]  # Docker: no engine here; its policy is tested below


def run(
    code: str, *args: Any, limits: SandboxLimits = FAST, backend: str = "subprocess"
) -> SandboxResult:
    return asyncio.run(run_checker(code, "check", list(args), limits, backend=backend))


@pytest.fixture(autouse=True)
def _no_docker(monkeypatch: pytest.MonkeyPatch):
    """No Docker engine, also on machines where one answers: the local backends are tested."""
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.delenv("HARNESS_SANDBOX", raising=False)
    docker_available.cache_clear()
    yield
    docker_available.cache_clear()


@pytest.fixture(params=LOCAL_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each local backend; bubblewrap only where it is installed and allowed."""
    if request.param == "bwrap" and not bwrap_available():
        pytest.skip("bubblewrap is not installed here, or may not create namespaces")
    return request.param


def test_an_installed_bubblewrap_is_used() -> None:
    """Where `bwrap` is installed (here, and CI installs it), it works and is chosen."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    assert bwrap_available()
    assert available_backends() == ["bwrap", "subprocess"]
    assert choose_backend() == "bwrap"


def test_a_passing_checker_returns_json_data(backend: str) -> None:
    code = 'def check(transcript):\n    return (len(transcript["messages"]) == 1, "reason")'
    result = run(code, {"messages": [{"role": "user", "content": "hi"}]}, backend=backend)
    expected = (True, [True, "reason"], "", backend)
    assert (result.ok, result.value, result.error, result.backend) == expected
    assert result.limits in ("cgroup v2", "cgroup v1", "rlimit", "rlimit per process")


def test_an_endless_loop_is_stopped(backend: str) -> None:
    result = run("def check():\n    while True:\n        pass", backend=backend)
    assert not result.ok
    assert result.error in ("CPU time limit of 1s exceeded", "timed out after 3s")


def test_the_wall_clock_timeout_ends_a_sleeping_checker(backend: str) -> None:
    code = "import time\ndef check():\n    time.sleep(60)"
    result = run(code, limits=SandboxLimits(wall_s=0.5), backend=backend)
    assert result.error == "timed out after 0.5s"


def test_allocating_10_gb_hits_the_memory_limit(backend: str) -> None:
    result = run("def check():\n    return len(bytearray(10 * 1024**3))", backend=backend)
    assert result.error == "memory limit of 512 MB exceeded"


def test_a_5_mb_file_in_its_directory_hits_the_file_size_limit(backend: str) -> None:
    code = 'def check():\n    with open("big.bin", "wb") as f:\n        f.write(b"x" * 5 * 1024 * 1024)'
    assert run(code, backend=backend).error == "file size limit of 1 MB exceeded"


def test_many_files_hit_the_file_write_limit(backend: str) -> None:
    code = 'def check():\n    for n in range(1000):\n        open(f"f{n}", "w").close()\n    return True'
    assert run(code, backend=backend).error == "forbidden: more than 100 file writes"


def test_limits_have_ceilings() -> None:
    with pytest.raises(ValueError, match="memory"):
        SandboxLimits(memory_mb=10_000_000)
    with pytest.raises(ValueError, match="times"):
        SandboxLimits(wall_s=301)


@pytest.mark.parametrize("where", ["tmp_path", "/etc"])
@pytest.mark.parametrize(
    ("how", "message"),
    [
        ('open(path, "w").write("x")', "forbidden: writing {path} outside the sandbox directory"),
        ("os.mkdir(path)", "forbidden: os.mkdir {path} outside the sandbox directory"),
        (
            'open("a", "w").close(); os.rename("a", path)',
            "forbidden: os.rename {path} outside the sandbox directory",
        ),
    ],
)
def test_writing_outside_its_directory_is_refused(
    where: str, how: str, message: str, tmp_path: Path, backend: str
) -> None:
    folder = os.path.realpath(tmp_path) if where == "tmp_path" else where
    path = os.path.join(folder, "harness-sandbox-escape")
    result = run(f"import os\ndef check(path):\n    {how}", path, backend=backend)
    assert result.error == message.format(path=path)
    assert not os.path.exists(path)


def test_the_parents_secrets_stay_out_of_reach(
    monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    environ = run("import os\ndef check():\n    return dict(os.environ)", backend=backend)
    assert environ.ok
    assert KEY not in json.dumps(environ.value)
    # LC_CTYPE is set by the interpreter itself; TMPDIR and PWD (bubblewrap's) name the
    # checker's own folder.
    assert set(environ.value) <= {"LC_CTYPE", "TMPDIR", "PWD"}
    code = "def check(path):\n    try:\n        return open(path).read()\n    except OSError as exc:\n        return str(exc)"
    for path in (
        f"/proc/{os.getpid()}/environ",
        "/proc/self/environ",
        "/proc/1/environ",
        "/etc/passwd",
    ):
        result = run(code, path, backend=backend)
        assert not result.ok, "a refused read is an error, even when the checker catches it"
        assert result.error.startswith("forbidden: reading /"), result.error
        assert KEY not in json.dumps(result.value) + result.error + result.stdout


@pytest.mark.parametrize(
    "body",
    [
        'import subprocess; subprocess.run(["true"])',
        'import os; os.system("true")',
        "import os; os.fork()",
        'import os; os.execv("/bin/true", ["true"])',
        'import os; os.posix_spawn("/bin/true", ["true"], {})',
        'import pty; pty.spawn("true")',
        "import os; os.kill(os.getppid(), 0)",
        "import socket; socket.socket()",
        'import socket; socket.create_connection(("127.0.0.1", 9))',
        'import socket; socket.getaddrinfo("localhost", 80)',
        "import ctypes",
        "import _ctypes",
        'import os; os.symlink("/etc/passwd", "link")',
    ],
)
def test_processes_sockets_and_ctypes_are_refused(body: str, backend: str) -> None:
    result = run(f"def check():\n    {body}", backend=backend)
    assert result.error.startswith("forbidden: "), result.error


def test_prints_cannot_forge_the_result(backend: str) -> None:
    forged = json.dumps({"ok": True, "value": True})
    code = f"import sys\ndef check():\n    print({forged!r})\n    print({forged!r}, file=sys.stderr)\n    return False"
    result = run(code, backend=backend)
    assert (result.ok, result.value) == (True, False)
    assert result.stdout == f"{forged}\n{forged}\n"


def test_long_output_is_truncated(backend: str) -> None:
    result = run('def check():\n    print("x" * 100_000)\n    return 1', backend=backend)
    assert result.value == 1
    assert result.stdout.endswith("[output truncated]")
    assert len(result.stdout) < STDOUT_LIMIT + 100


@pytest.mark.parametrize(
    ("code", "error"),
    [
        ("def check():\n    return 1 +", "SyntaxError: invalid syntax (line 2)"),
        ("def other():\n    return 1", "no function 'check' in the checker code"),
        ("def check():\n    return 1 / 0", "ZeroDivisionError: division by zero"),
        (
            "def check():\n    return {1}",
            "the return value is not JSON-serialisable: "
            "TypeError: Object of type set is not JSON serializable",
        ),
    ],
)
def test_failures_are_one_line_errors(code: str, error: str, backend: str) -> None:
    assert run(code, backend=backend) == SandboxResult(ok=False, error=error, backend=backend)


def test_eight_checkers_run_at_once(backend: str) -> None:
    async def eight() -> list[SandboxResult]:
        code = "def check(n):\n    return n * n"
        return await asyncio.gather(
            *(run_checker(code, "check", [n], FAST, backend=backend) for n in range(8))
        )

    results = asyncio.run(eight())
    assert [(r.ok, r.value, r.error, r.backend) for r in results] == [
        (True, n * n, "", backend) for n in range(8)
    ]


def test_its_directory_is_removed_afterwards() -> None:
    code = """
import os
def check():
    os.makedirs("a/b")
    open("a/b/f.txt", "w").write("x")
    os.chmod("a", 0)
    return os.getcwd()
"""
    result = run(code)
    assert result.ok
    assert Path(result.value).parent == Path(tempfile.gettempdir()).resolve()
    assert not os.path.exists(result.value)


def test_without_a_docker_engine_the_strongest_local_backend_runs() -> None:
    assert docker_available() is False
    expected = "bwrap" if bwrap_available() else "subprocess"
    result = asyncio.run(run_checker("def check():\n    return 1", "check", [], FAST))
    assert result.backend == expected


def test_the_container_is_isolated_and_removed() -> None:
    from docker.models.containers import _create_container_args

    limits = SandboxLimits(cpu_s=2, memory_mb=256, file_mb=3)
    config = docker_container_config(limits, "python:3.11-slim")
    assert config["image"] == "python:3.11-slim"
    assert config["command"][:5] == ["python", "-I", "-S", "-B", "-c"]
    assert config["command"][6:9] == ["2", "256", "3"]
    assert config["environment"] == ["TMPDIR=/sandbox"]  # nothing of the harness's
    # What docker-py sends to the engine.
    create = _create_container_args({**config, "version": "1.44"})
    host = create["host_config"]
    assert create["network_disabled"] is True
    assert host["NetworkMode"] == "none"
    assert host["ReadonlyRootfs"] is True
    assert host["AutoRemove"] is True
    assert host["Memory"] == host["MemorySwap"] <= (256 + 64) * 1024 * 1024
    assert host["NanoCpus"] == 10**9
    assert host["PidsLimit"] > 0
    assert host["CapDrop"] == ["ALL"]
    assert create["working_dir"] in host["Tmpfs"]
    assert create["user"] != "root"


def test_the_audit_hook_depends_on_nothing_a_checker_can_change() -> None:
    hook = checker.audit_hook("/tmp/sandbox", ("/usr",), 10)
    loads = {instruction.opname for instruction in dis.get_instructions(hook)}
    assert not loads & {"LOAD_GLOBAL", "LOAD_NAME"}
    assert not any(hasattr(const, "co_code") for const in hook.__code__.co_consts)
    immutable = (str, int, tuple, frozenset, type, type(len), type(str.join), type(str.__add__))
    assert hook.__closure__ is not None
    assert all(isinstance(cell.cell_contents, immutable) for cell in hook.__closure__)


# ---------------------------------------------------------------- escape attempts, every backend

FORGED = json.dumps({"ok": True, "value": True})


def nobody_connected(server: socket.socket) -> bool:
    try:
        server.accept()[0].close()
    except TimeoutError:
        return True
    return False


def test_no_network_to_the_host(backend: str, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    code = f"import socket\ndef check():\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n    return True"
    result = run(code, backend=backend)
    assert result.error.startswith("forbidden: socket."), result.error
    assert nobody_connected(listener)


def test_the_results_store_and_other_files_are_out_of_reach(backend: str, tmp_path: Path) -> None:
    store = tmp_path / "results.db"
    store.write_text(f"a stored transcript holding {KEY}")
    for path in (store, Path.home() / ".bashrc", Path("/etc/hostname")):
        code = f"def check():\n    return open({str(path)!r}).read()"
        result = run(code, backend=backend)
        assert result.error.startswith("forbidden: reading /"), result.error
        assert KEY not in result.error + result.stdout


def test_a_swallowed_refusal_still_makes_the_check_an_error(backend: str) -> None:
    code = "import glob\ndef check():\n    found = glob.glob('/etc/*')  # glob catches the refusal\n    return True"
    result = run(code, backend=backend)
    assert (result.ok, result.error) == (False, "forbidden: reading /etc outside the allowed paths")


def test_a_result_written_by_the_checker_is_not_taken(backend: str) -> None:
    forge = f"import os\ndef forge():\n    for fd in range(3, 64):\n        try:\n            os.write(fd, {FORGED!r}.encode() + b'\\n')\n        except OSError:\n            pass\n"
    returned_false = run(forge + "def check():\n    forge()\n    return False", backend=backend)
    assert (returned_false.ok, returned_false.error) == (
        False,
        "the checker wrote to its result channel itself",
    )
    after_refusal = run(
        forge
        + "def check():\n    try:\n        open('/etc/passwd')\n    except OSError:\n        forge()\n    return True",
        backend=backend,
    )
    assert after_refusal.error == "forbidden: reading /etc/passwd outside the allowed paths"


def test_a_fork_bomb_and_threads_that_escape_the_refusal_fail(backend: str) -> None:
    code = """
import os, threading
def check():
    def bomb():
        try:
            os.fork()
        except OSError:
            pass
    threads = [threading.Thread(target=bomb) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return True
"""
    assert run(code, backend=backend).error == "forbidden: os.fork"


def test_a_cpu_bomb_in_threads_is_stopped(backend: str) -> None:
    code = "import threading\ndef spin():\n    while True:\n        pass\ndef check():\n    for _ in range(4):\n        threading.Thread(target=spin, daemon=True).start()\n    spin()"
    result = run(code, backend=backend)
    assert result.error in ("CPU time limit of 1s exceeded", "timed out after 3s")


# ---------------------------------------------------------------- the bubblewrap boundary itself


def bare(code: str) -> dict[str, Any]:
    """Run code under the bubblewrap policy without the child program, its rlimits or its audit
    hook (as the backend starts it: an empty environment): what the boundary alone allows. The
    code sets `found`, printed as JSON."""
    if not bwrap_available():
        pytest.skip("bubblewrap is not installed here, or may not create namespaces")
    program = f"import json\nfound = {{}}\n{code}\nprint(json.dumps(found))"
    done = subprocess.run(
        [*bwrap_policy(), interpreter(), "-I", "-S", "-c", program],
        capture_output=True,
        text=True,
        timeout=60,
        env={},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def attempt(expression: str, name: str) -> str:
    """Code recording what `expression` gave, or the error it raised, as found[name]."""
    return f"try:\n    found[{name!r}] = repr({expression})\nexcept Exception as exc:\n    found[{name!r}] = type(exc).__name__\n"


def test_the_boundary_alone_keeps_host_files_processes_and_network_out(
    tmp_path: Path, listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    store = tmp_path / "results.db"
    store.write_text(KEY)
    port = listener.getsockname()[1]
    code = (
        "import ctypes, os, pwd, socket\n"
        + attempt("os.getuid()", "uid")
        + attempt(f"open({str(store)!r}).read()", "store")
        + attempt("open('/proc/1/environ').read()", "environ1")
        + attempt("sorted(os.listdir('/'))", "root")
        + attempt("pwd.getpwuid(0)", "getpwuid")  # libc, below any audit hook
        + attempt("ctypes.CDLL(None).getpwnam(b'root')", "ctypes_getpwnam")
        + attempt(f"os.kill({os.getpid()}, 0)", "kill_host_pid")
        + attempt("sorted(p for p in os.listdir('/proc') if p.isdigit())", "pids")
        + attempt(f"socket.create_connection(('127.0.0.1', {port}), timeout=2)", "connect")
        + attempt(f"open({str(tmp_path / 'escaped')!r}, 'w')", "write_host")
        + attempt("open('/usr/escaped', 'w')", "write_usr")
        + attempt("open('/sandbox/big', 'wb').write(b'x' * 64 * 1024 * 1024)", "huge_file")
        + attempt(
            "(lambda pid: os._exit(0) if pid == 0 else os.waitpid(pid, 0)[1])(os.fork())", "fork"
        )
    )
    found = bare(code)
    assert found["uid"] == "65534"
    assert found["store"] == "FileNotFoundError"
    assert KEY not in json.dumps(found)
    assert found["root"] == repr(
        sorted(["bin", "dev", "lib", "lib64", "proc", "root", "sandbox", "usr", *found_trees()])
    )
    assert found["getpwuid"] == "KeyError"  # no /etc/passwd in there
    assert found["ctypes_getpwnam"] == "0"  # a NULL pointer: nothing to read
    assert found["kill_host_pid"] == "ProcessLookupError"
    assert len(eval(found["pids"])) <= 3  # bubblewrap's init and this process
    assert found["connect"] in ("OSError", "ConnectionRefusedError")
    assert nobody_connected(listener)
    assert found["write_host"] == "FileNotFoundError" and not (tmp_path / "escaped").exists()
    assert found["write_usr"] == "OSError"  # read-only file system
    assert found["huge_file"] == "OSError"  # the tmpfs is 32 MB
    assert not (Path("/usr") / "escaped").exists()


def found_trees() -> list[str]:
    """Top folders of the system's trees that exist here beside /usr, /bin, /lib, /lib64."""
    return sorted({name for name in ("sbin", "lib32", "libx32") if os.path.lexists(f"/{name}")})

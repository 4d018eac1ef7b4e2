"""The checker sandbox: results, limits, refusals, secrets, concurrency and the Docker policy."""

from __future__ import annotations

import asyncio
import dis
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from harness.grading import _sandbox_child
from harness.grading.sandbox import (
    STDOUT_LIMIT,
    SandboxLimits,
    SandboxResult,
    docker_available,
    docker_container_config,
    run_checker,
)

FAST = SandboxLimits(wall_s=3, cpu_s=1)
KEY = "sk-planted-0123456789abcdef"


def run(code: str, *args: Any, limits: SandboxLimits = FAST) -> SandboxResult:
    return asyncio.run(run_checker(code, "check", list(args), limits))


@pytest.fixture(autouse=True)
def _no_docker(monkeypatch: pytest.MonkeyPatch):
    """The subprocess backend, also on machines where a Docker engine answers."""
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    docker_available.cache_clear()
    yield
    docker_available.cache_clear()


def test_a_passing_checker_returns_json_data() -> None:
    code = 'def check(transcript):\n    return (len(transcript["messages"]) == 1, "reason")'
    result = run(code, {"messages": [{"role": "user", "content": "hi"}]})
    assert result == SandboxResult(ok=True, value=[True, "reason"], backend="subprocess")


def test_an_endless_loop_is_stopped() -> None:
    result = run("def check():\n    while True:\n        pass")
    assert not result.ok
    assert result.error in ("CPU time limit of 1s exceeded", "timed out after 3s")


def test_the_wall_clock_timeout_ends_a_sleeping_checker() -> None:
    code = "import time\ndef check():\n    time.sleep(60)"
    result = run(code, limits=SandboxLimits(wall_s=0.5))
    assert result.error == "timed out after 0.5s"


def test_allocating_10_gb_hits_the_memory_limit() -> None:
    result = run("def check():\n    return len(bytearray(10 * 1024**3))")
    assert result.error == "memory limit of 512 MB exceeded"


def test_a_5_mb_file_in_its_directory_hits_the_file_size_limit() -> None:
    code = 'def check():\n    with open("big.bin", "wb") as f:\n        f.write(b"x" * 5 * 1024 * 1024)'
    assert run(code).error == "file size limit of 1 MB exceeded"


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
    where: str, how: str, message: str, tmp_path: Path
) -> None:
    folder = os.path.realpath(tmp_path) if where == "tmp_path" else where
    path = os.path.join(folder, "harness-sandbox-escape")
    result = run(f"import os\ndef check(path):\n    {how}", path)
    assert result.error == message.format(path=path)
    assert not os.path.exists(path)


def test_the_parents_secrets_stay_out_of_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    code = """
import os
def check(parent):
    found = {"environ": dict(os.environ)}
    for path in (f"/proc/{parent}/environ", "/proc/self/environ", "/etc/passwd"):
        try:
            found[path] = open(path).read()
        except OSError as exc:
            found[path] = str(exc)
    return found
"""
    result = run(code, os.getpid())
    assert result.ok
    assert KEY not in json.dumps(result.value) + result.error + result.stdout
    assert set(result.value["environ"]) <= {"LC_CTYPE"}  # set by the interpreter itself
    assert result.value[f"/proc/{os.getpid()}/environ"].startswith("forbidden: reading /proc/")
    assert result.value["/proc/self/environ"].startswith("forbidden: reading /proc/")
    assert result.value["/etc/passwd"].startswith("forbidden: reading /etc/passwd")


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
def test_processes_sockets_and_ctypes_are_refused(body: str) -> None:
    result = run(f"def check():\n    {body}")
    assert result.error.startswith("forbidden: "), result.error


def test_prints_cannot_forge_the_result() -> None:
    forged = json.dumps({"ok": True, "value": True})
    code = f"import sys\ndef check():\n    print({forged!r})\n    print({forged!r}, file=sys.stderr)\n    return False"
    result = run(code)
    assert (result.ok, result.value) == (True, False)
    assert result.stdout == f"{forged}\n{forged}\n"


def test_long_output_is_truncated() -> None:
    result = run('def check():\n    print("x" * 100_000)\n    return 1')
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
def test_failures_are_one_line_errors(code: str, error: str) -> None:
    assert run(code) == SandboxResult(ok=False, error=error, backend="subprocess")


def test_eight_checkers_run_at_once() -> None:
    async def eight() -> list[SandboxResult]:
        code = "def check(n):\n    return n * n"
        return await asyncio.gather(*(run_checker(code, "check", [n], FAST) for n in range(8)))

    results = asyncio.run(eight())
    assert [(r.ok, r.value) for r in results] == [(True, n * n) for n in range(8)]


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


def test_without_a_docker_engine_the_subprocess_backend_runs() -> None:
    assert docker_available() is False
    assert run("def check():\n    return 1").backend == "subprocess"


def test_the_container_is_isolated_and_removed() -> None:
    from docker.models.containers import _create_container_args

    limits = SandboxLimits(cpu_s=2, memory_mb=256, file_mb=3)
    config = docker_container_config(limits, "python:3.11-slim")
    assert config["image"] == "python:3.11-slim"
    assert config["command"][:5] == ["python", "-I", "-S", "-B", "-c"]
    assert config["command"][6:9] == ["2", "256", "3"]
    assert not config["environment"]
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
    hook = _sandbox_child.audit_hook("/tmp/sandbox", ("/usr",), 10)
    loads = {instruction.opname for instruction in dis.get_instructions(hook)}
    assert not loads & {"LOAD_GLOBAL", "LOAD_NAME"}
    assert not any(hasattr(const, "co_code") for const in hook.__code__.co_consts)
    immutable = (str, int, tuple, frozenset, type, type(len), type(str.join), type(str.__add__))
    assert hook.__closure__ is not None
    assert all(isinstance(cell.cell_contents, immutable) for cell in hook.__closure__)

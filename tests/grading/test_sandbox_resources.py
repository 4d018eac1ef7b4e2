"""The sandbox's machine-wide bounds and what it leaves behind: checks at once bounded by the
memory budget and the harness's open files (within a process and across processes, waiting,
never failing), the cgroups of a harness killed mid-check removed by the next one, and the
Docker backend's policy as docker-py sends it to the engine (timeout enforced in the
container, the documented process cap, an image pinned by digest)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from harness.grading import sandbox
from harness.grading.sandbox import (
    SandboxLimits,
    docker_available,
    docker_container_config,
    run_checker,
)
from harness.grading.sandbox import cgroup as sandbox_cgroup
from harness.grading.sandbox import docker as sandbox_docker
from harness.grading.sandbox import slots as sandbox_slots
from harness.grading.sandbox.local import bwrap_available
from harness.grading.sandbox.result import PROCESS_CAP, WORKDIR_MB
from harness.grading.sandbox.slots import SLOTS, machine_budget
from tests.conftest import ROOT

CODE = "def check(t):\n    return sum(len(m) for m in t)"
SMALL = SandboxLimits(wall_s=10, cpu_s=5, memory_mb=128)
NEED = SMALL.memory_mb + WORKDIR_MB  # what one check holds of the budget


def local_backend() -> str:
    return "bwrap" if bwrap_available() else "subprocess"


@pytest.fixture
def budget(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A small machine budget of its own (three checks' memory), in a private slot folder."""
    monkeypatch.setenv(sandbox_slots.MEMORY_ENV, str(3 * NEED + NEED // 2))
    monkeypatch.setenv(sandbox_slots.CHECKS_ENV, "10")  # the memory is what binds
    monkeypatch.setenv(sandbox_slots.SLOTS_DIR_ENV, str(tmp_path / "slots"))
    machine_budget.cache_clear()
    yield machine_budget()
    assert SLOTS.held() == (0, 0)
    machine_budget.cache_clear()


def most_at_once(marks: list[str]) -> int:
    """The most checks running at once, from their start (+) and end (-) marks in order."""
    running = most = 0
    for mark in marks:
        running += 1 if mark.startswith("+") else -1
        most = max(most, running)
    assert running == 0
    return most


def test_checks_at_once_never_hold_more_memory_than_the_budget(
    budget: sandbox_slots.Budget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """12 checks started together: at most 3 sandboxes run at once (3 x 160 MB of 560), the
    slot folder never holds more, and every check passes (they wait, they do not fail)."""
    marks: list[str] = []
    held_mb: list[int] = []
    real = sandbox.run_local

    async def counted(payload: bytes, limits: SandboxLimits, backend: str) -> Any:
        marks.append("+")
        folder = Path(budget.directory)
        held_mb.append(sum(int(p.name.split("-")[0]) for p in folder.iterdir() if p.name[0] != "l"))
        try:
            return await real(payload, limits, backend)
        finally:
            marks.append("-")

    monkeypatch.setattr(sandbox, "run_local", counted)

    async def main() -> list[Any]:
        checks = [
            run_checker(CODE, "check", [["ab", "c"]], SMALL, backend=local_backend())
            for _ in range(12)
        ]
        return await asyncio.gather(*checks)

    results = asyncio.run(main())
    assert [(r.ok, r.value) for r in results] == [(True, 3)] * 12, results
    assert len(marks) == 24
    assert 2 <= most_at_once(marks) <= 3
    assert max(held_mb) <= budget.memory_mb
    assert [p.name for p in Path(budget.directory).iterdir()] == ["lock"]  # all slots freed


def test_a_check_larger_than_the_budget_runs_alone(budget: sandbox_slots.Budget) -> None:
    limits = SandboxLimits(wall_s=10, memory_mb=1024)
    result = asyncio.run(run_checker(CODE, "check", [["x"]], limits, backend=local_backend()))
    assert (result.ok, result.value) == (True, 1)


def test_a_cancelled_wait_gives_nothing_away(budget: sandbox_slots.Budget) -> None:
    """Checks cancelled while they wait for a slot (a timeout above them) hold none after."""

    async def main() -> None:
        first = [SLOTS.acquire(NEED) for _ in range(3)]
        names = await asyncio.gather(*first)
        waiting = asyncio.ensure_future(SLOTS.acquire(NEED))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        for name in names:
            SLOTS.release(name)
        assert SLOTS.held() == (0, 0)
        # the folder's room is whole again: three more fit at once
        names = await asyncio.gather(*(SLOTS.acquire(NEED) for _ in range(3)))
        for name in names:
            SLOTS.release(name)

    asyncio.run(main())


def test_without_a_usable_slot_folder_the_bound_holds_per_process(
    budget: sandbox_slots.Budget, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A slot folder that is not this user's (anyone may make one in /tmp first, and fill it)
    is not used: the bound then holds within the process, and checks still run."""
    if os.geteuid() != 0:
        pytest.skip("making a folder another user's needs root")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    os.chown(foreign, 12345, 12345)
    monkeypatch.setenv(sandbox_slots.SLOTS_DIR_ENV, str(foreign))
    machine_budget.cache_clear()

    async def main() -> tuple[list[str], bool]:
        names = await asyncio.gather(*(SLOTS.acquire(NEED) for _ in range(3)))
        fourth = asyncio.ensure_future(SLOTS.acquire(NEED))
        await asyncio.sleep(0.05)
        waited = not fourth.done()
        SLOTS.release(names[0])
        names[0] = await fourth
        return names, waited

    names, waited = asyncio.run(main())
    assert waited
    assert list(foreign.iterdir()) == []
    for name in names:
        SLOTS.release(name)


def test_a_forked_child_holds_none_of_its_parents_slots(budget: sandbox_slots.Budget) -> None:
    async def take() -> str:
        return await SLOTS.acquire(NEED)

    name = asyncio.run(take())
    try:
        pid = os.fork()
        if pid == 0:  # the child: nothing held, and it may take slots of its own
            code = 0 if SLOTS.held() == (0, 0) else 1
            os._exit(code)
        assert os.waitpid(pid, 0)[1] == 0
        assert SLOTS.held() == (1, NEED)
    finally:
        SLOTS.release(name)


HOLDER = """
import asyncio, os, sys
from harness.grading import sandbox
from harness.grading.sandbox import slots as sandbox_slots
{setup}
async def main():
    {body}
asyncio.run(main())
"""

MARKED_RUNS = """
    real = sandbox.run_local
    marks = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    async def counted(payload, limits, backend):
        os.write(marks, f"+{os.getpid()}\\n".encode())
        try:
            return await real(payload, limits, backend)
        finally:
            os.write(marks, f"-{os.getpid()}\\n".encode())
    sandbox.run_local = counted
    limits = sandbox.SandboxLimits(wall_s=10, memory_mb=128)
    code = "def check(t):\\n    return t"
    checks = [sandbox.run_checker(code, "check", [n], limits, backend=sys.argv[2])
              for n in range(8)]
    results = await asyncio.gather(*checks)
    assert [(r.ok, r.value) for r in results] == [(True, n) for n in range(8)], results
"""


def harness_process(body: str, env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    script = HOLDER.format(setup="", body=textwrap.indent(textwrap.dedent(body), "    ").strip())
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def budget_env(folder: Path, memory_mb: int, checks: int) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env[sandbox_slots.MEMORY_ENV] = str(memory_mb)
    env[sandbox_slots.CHECKS_ENV] = str(checks)
    env[sandbox_slots.SLOTS_DIR_ENV] = str(folder)
    return env


def test_the_bound_holds_across_harness_processes(tmp_path: Path) -> None:
    """Three harness processes, 8 checks each, one slot folder with room for two checks: their
    start and end marks (appended in the order they happen) never show three running."""
    marks = tmp_path / "marks"
    env = budget_env(tmp_path / "slots", 2 * NEED, 10)
    processes = [harness_process(MARKED_RUNS, env, str(marks), local_backend()) for _ in range(3)]
    for process in processes:
        _out, err = process.communicate(timeout=240)
        assert process.returncode == 0, err.decode()[-2000:]
    lines = marks.read_text().split()
    assert len(lines) == 48
    assert most_at_once(lines) <= 2
    assert {line[1:] for line in lines} == {str(p.pid) for p in processes}


def test_a_dead_process_holds_no_slot(
    budget: sandbox_slots.Budget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A harness killed (kill -9) while it holds the only slot: the next check still runs."""
    env = budget_env(Path(budget.directory), budget.memory_mb, 1)
    holder = harness_process(
        """
        name = await sandbox_slots.SLOTS.acquire(100)
        print(name, flush=True)
        await asyncio.sleep(600)
        """,
        env,
    )
    assert holder.stdout is not None
    name = holder.stdout.readline().decode().strip()
    assert (Path(budget.directory) / name).exists()
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    monkeypatch.setenv(sandbox_slots.CHECKS_ENV, "1")
    machine_budget.cache_clear()
    result = asyncio.run(run_checker(CODE, "check", [["x"]], SMALL, backend=local_backend()))
    assert (result.ok, result.value) == (True, 1)
    assert not (Path(budget.directory) / name).exists()


# ---------------------------------------------------------------- open files

FD_RUN = """
import asyncio, errno, os, resource, sys
from harness.grading import sandbox
from harness.grading.sandbox import slots as sandbox_slots
resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

async def other_task():
    # another task of the run, opening files while the checks run
    files = []
    for _ in range(60):
        files.append(open(os.devnull))
        await asyncio.sleep(0.01)
    for f in files:
        f.close()
    return len(files)

async def main():
    limits = sandbox.SandboxLimits(wall_s=60, cpu_s=5, memory_mb=64)
    code = "def check(t):\\n    return t * 2"
    checks = [sandbox.run_checker(code, "check", [n], limits, backend=sys.argv[1])
              for n in range(150)]
    *results, opened = await asyncio.gather(*checks, other_task(), return_exceptions=True)
    bad = [r for r in results if not (getattr(r, "ok", False))]
    print(sandbox_slots.machine_budget().checks, len(bad), opened, repr(bad[:3]))
    assert [r.value for r in results] == [n * 2 for n in range(150)], bad[:3]
    assert opened == 60, opened

asyncio.run(main())
"""


def test_150_checks_under_256_open_files_all_complete(tmp_path: Path) -> None:
    """With RLIMIT_NOFILE at 256, 150 checks started at once and another task opening 60
    files: every check returns its value, nothing fails with EMFILE (the slots this process
    may hold come from its open-file limit)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        sandbox_slots.SLOTS_DIR_ENV: str(tmp_path / "slots"),
    }
    env.pop(sandbox_slots.CHECKS_ENV, None)
    env.pop(sandbox_slots.MEMORY_ENV, None)
    done = subprocess.run(
        [sys.executable, "-c", FD_RUN, local_backend()],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    slots, bad, opened, _ = done.stdout.split(" ", 3)
    assert (bad, opened) == ("0", "60")
    assert 1 <= int(slots) <= 256 // 2 // sandbox_slots.FDS_PER_CHECK
    assert "Too many open files" not in done.stdout + done.stderr


def test_the_budget_comes_from_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (sandbox_slots.MEMORY_ENV, sandbox_slots.CHECKS_ENV, sandbox_slots.SLOTS_DIR_ENV):
        monkeypatch.delenv(name, raising=False)
    machine_budget.cache_clear()
    try:
        found = machine_budget()
    finally:
        machine_budget.cache_clear()
    meminfo = Path("/proc/meminfo").read_text().split()
    available = int(meminfo[meminfo.index("MemAvailable:") + 1]) // 1024
    assert 0 < found.memory_mb <= available
    assert 1 <= found.checks <= (os.cpu_count() or 1) * sandbox_slots.CHECKS_PER_CPU
    monkeypatch.setenv(sandbox_slots.CHECKS_ENV, "many")
    with pytest.raises(ValueError, match="HARNESS_SANDBOX_CHECKS"):
        machine_budget()
    # bad input when a command starts, and a check's error (not an exception) after
    assert sandbox.sandbox_env_problem() == (
        "HARNESS_SANDBOX_CHECKS='many': expected a positive whole number"
    )
    result = asyncio.run(run_checker(CODE, "check", [[]], backend=local_backend()))
    assert (result.ok, result.error) == (False, sandbox.sandbox_env_problem())
    machine_budget.cache_clear()


# ---------------------------------------------------------------- cgroups of a killed harness

SLEEPER = """
import asyncio, sys
from harness.grading import sandbox
limits = sandbox.SandboxLimits(wall_s=120, cpu_s=100)
code = "import time\\ndef check():\\n    time.sleep(100)\\n    return True"
asyncio.run(sandbox.run_checker(code, "check", [], limits, backend=sys.argv[1]))
"""


def cgroups_of(pid: int) -> list[Path]:
    found: list[Path] = []
    for controller in ("", *sandbox_cgroup.V1_CONTROLLERS):
        parent = sandbox_cgroup._parent(controller)
        if parent is not None:
            found += list(parent.glob(f"{sandbox_cgroup.PREFIX}{pid}-*"))
    return found


def processes_in(groups: list[Path]) -> set[int]:
    found: set[int] = set()
    for group in groups:
        with contextlib.suppress(OSError):
            found |= {int(word) for word in (group / "cgroup.procs").read_text().split()}
    return found


def running(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@pytest.mark.parametrize("backend", ["bwrap", "subprocess"])
def test_the_cgroups_of_a_killed_harness_are_removed_at_the_next_start(
    backend: str, tmp_path: Path
) -> None:
    if not sandbox_cgroup.cgroups_writable():
        pytest.skip("no writable cgroup tree here: the sandbox falls back to rlimits")
    if backend == "bwrap" and not bwrap_available():
        pytest.skip("bubblewrap is not installed here, or may not create namespaces")
    env = {**os.environ, "PYTHONPATH": str(ROOT), sandbox_slots.SLOTS_DIR_ENV: str(tmp_path)}
    owner = subprocess.Popen([sys.executable, "-c", SLEEPER, backend], cwd=ROOT, env=env)
    inside: set[int] = set()
    try:
        for _ in range(600):  # the check's cgroups exist, with the sandbox in them
            groups = cgroups_of(owner.pid)
            inside = processes_in(groups)
            if groups and inside and len(inside) >= 2:
                break
            time.sleep(0.05)
        assert groups and inside, "the check never started"
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        # kill -9 leaves them: one folder per controller (3 under cgroup v1)
        assert cgroups_of(owner.pid)
        start = [
            sys.executable,
            "-c",
            "from harness.grading.sandbox import cgroup as c\nprint(c.cgroups_writable())",
        ]
        subprocess.run(start, cwd=ROOT, env=env, check=True, timeout=60)
        assert cgroups_of(owner.pid) == []
        for _ in range(500):  # killed (reaped by init in its own time)
            if not any(running(pid) for pid in inside):
                break
            time.sleep(0.01)
        assert [pid for pid in inside if running(pid)] == []
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        for pid in inside:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def test_only_the_cgroups_of_dead_owners_are_taken() -> None:
    """This process's cgroups and a live process's stay; a dead one's go; one named in another
    PID namespace stays (its pid means nothing here)."""
    if not sandbox_cgroup.cgroups_writable():
        pytest.skip("no writable cgroup tree here")
    mine = sandbox_cgroup.create(64 * 2**20, 4)
    assert mine is not None
    other = subprocess.Popen(["sleep", "60"])
    namespace = sandbox_cgroup._pid_namespace()
    made = {
        "live": f"{sandbox_cgroup.PREFIX}{other.pid}-{namespace}-0-0123abcd",
        "foreign": f"{sandbox_cgroup.PREFIX}{other.pid}-{namespace + 1}-0-0123abcd",
    }
    parents = [sandbox_cgroup._parent(c) for c in ("", *sandbox_cgroup.V1_CONTROLLERS)]
    parents = [parent for parent in parents if parent is not None]
    try:
        for name in made.values():
            for parent in parents:
                (parent / name).mkdir()
        sandbox_cgroup.remove_leftovers()
        assert all(path.exists() for path in mine.dirs.values())
        assert all((parents[0] / name).exists() for name in made.values())
        other.kill()
        other.wait()
        sandbox_cgroup.remove_leftovers()
        assert not (parents[0] / made["live"]).exists()
        assert (parents[0] / made["foreign"]).exists()
    finally:
        mine.close()
        other.kill()
        other.wait()
        for name in made.values():
            for parent in parents:
                with contextlib.suppress(OSError):
                    (parent / name).rmdir()


# ---------------------------------------------------------------- Docker, as the engine gets it


def engine_request(limits: SandboxLimits, image: str = sandbox_docker.DOCKER_IMAGE) -> dict:
    """The body of the create request docker-py sends to the engine for the sandbox's config."""
    import docker
    from docker.models.containers import _create_container_args

    client = docker.APIClient(base_url="unix:///nonexistent/docker.sock", version="1.44")
    create = _create_container_args({**docker_container_config(limits, image), "version": "1.44"})
    return dict(client.create_container_config(**create))


def test_the_engine_enforces_the_wall_timeout_and_removes_the_container() -> None:
    body = engine_request(SandboxLimits(wall_s=7))
    grace = sandbox_docker.DOCKER_TIMEOUT_GRACE_S
    assert body["Entrypoint"] == ["timeout", "--signal=KILL", f"{7 + grace:g}"]
    assert body["Cmd"][:5] == ["python", "-I", "-S", "-B", "-c"]
    assert body["StopSignal"] == "SIGKILL"
    assert body["HostConfig"]["AutoRemove"] is True
    assert body["HostConfig"]["Init"] is True
    assert body["Labels"][sandbox_docker.LABEL] == "checker"
    assert body["Labels"][sandbox_docker.OWNER_LABEL].endswith(f":{os.getpid()}")


def test_the_container_has_the_documented_process_cap() -> None:
    body = engine_request(SandboxLimits())
    assert body["HostConfig"]["PidsLimit"] == PROCESS_CAP == 16


def test_the_image_is_pinned_by_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    from docker.utils import parse_repository_tag

    monkeypatch.delenv(sandbox_docker.IMAGE_ENV, raising=False)
    image = sandbox_docker.docker_image()
    assert sandbox_docker.image_problem(image) is None
    assert engine_request(SandboxLimits())["Image"] == image
    # what `client.images.pull` asks the engine for: the digest, not a tag
    _repository, tag = parse_repository_tag(image)
    assert tag is not None and tag.startswith("sha256:") and len(tag) == 7 + 64
    pinned = "registry.example/checkers@sha256:" + "ab" * 32
    monkeypatch.setenv(sandbox_docker.IMAGE_ENV, pinned)
    assert sandbox_docker.docker_image() == pinned
    assert sandbox.sandbox_env_problem() is None
    monkeypatch.setenv(sandbox_docker.IMAGE_ENV, "python:3.11-slim")  # bad input at the start
    assert "not pinned by digest" in (sandbox.sandbox_env_problem() or "")


def test_an_image_by_tag_is_refused_before_the_engine_is_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import docker

    def no_engine(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("the engine was asked")

    monkeypatch.setattr(docker, "from_env", no_engine)
    payload = json.dumps({"code": CODE, "function": "check", "args": [[]]}).encode() + b"\n"
    for image in ("python:3.11-slim", "python@sha256:abc", "python:3.11-slim@sha256:"):
        result = sandbox_docker.run_docker(payload, SandboxLimits(), image)
        assert (result.ok, result.backend) == (False, "docker")
        assert "not pinned by digest" in result.error


def test_a_container_does_not_outlive_its_timeout() -> None:
    """Under a real engine (none here: skipped): a sleeping checker ends as a timeout and no
    container of this process is left."""
    if not docker_available():
        pytest.skip("no Docker engine answers here")
    import docker

    code = "import time\ndef check():\n    time.sleep(60)"
    limits = SandboxLimits(wall_s=2)
    result = asyncio.run(run_checker(code, "check", [], limits, backend="docker"))
    assert (result.ok, result.error) == (False, "timed out after 2s")
    client = docker.from_env()
    owner = f"{sandbox_docker.OWNER_LABEL}={sandbox_docker.owner()}"
    time.sleep(1)
    assert client.containers.list(all=True, filters={"label": owner}) == []

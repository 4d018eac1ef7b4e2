"""Shared test set-up: no network, the repository as working folder, a CLI runner."""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from harness.models import ModelRuntime
    from harness.sim.suite import TaskCase
    from harness.specs.agent import AgentVariant
    from harness.testing.fake_server import FakeServer
    from harness.transcript import Transcript

os.environ.update(
    WANDB_MODE="disabled",
    WANDB_DISABLE_WEAVE="true",
    WANDB_ERROR_REPORTING="false",
    WANDB_SILENT="true",
    # litellm (under tau2-bench, tests/integrations/test_tau2.py) fetches its price list from GitHub when
    # imported unless told to use the copy it ships
    LITELLM_LOCAL_MODEL_COST_MAP="True",
)

ROOT = Path(__file__).resolve().parents[1]

# Checker code runs only under OS isolation (bubblewrap, or Docker) unless a run allows it to
# run without. The tests' checkers are this repository's own, so where there is neither (CI
# installs bubblewrap; a laptop may lack it) they may, and the tests run anywhere; the tests of
# the refusal itself (test_unsafe_checkers.py) hide bubblewrap and clear this.
if "HARNESS_SANDBOX" not in os.environ:
    from harness.grading.sandbox import isolation_available

    if not isolation_available():
        os.environ["HARNESS_SANDBOX"] = "none"
# The bundled variants run on the embedded model; exact tests swap in the scripted rules.
SCRIPTED = "agent.model={id: scripted, script: agents/scripts/support.yaml}"
JUDGE = "{id: scripted, script: agents/scripts/judge.yaml}"
# Support tasks whose episodes play the same through `served_model` as with the scripted model
# in this process (the others' tool errors reach a served model as plain tool text).
SERVED_TASKS = (
    "address-change,cancel-processing,dispute-handoff,handoff-request,order-status,"
    "out-of-scope,refund-by-email,refund-delivered,two-requests"
)


@contextmanager
def served_model(**options) -> Iterator[tuple[FakeServer, str]]:
    """The support script served by a fake OpenAI endpoint, and the `agent.model=` override that
    names it: the server counts every call an agent makes, in this process or any other, so a
    test can tell how many episodes were played (stored rows cannot: their keys are unique)."""
    from harness.specs.load import load_script
    from harness.testing.fake_server import FakeServer

    script = load_script(ROOT / "agents/scripts/support.yaml").spec
    with FakeServer(script, **options).running() as server:
        yield server, f"agent.model={{id: openai/fake, base_url: '{server.url}/v1'}}"


@pytest.fixture(autouse=True)
def _in_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bundled paths in tests and in expected messages are relative to the repository."""
    monkeypatch.chdir(ROOT)


@pytest.fixture
def cli():
    """Run the `harness` command in-process; returns click's Result (stdout, stderr, exit)."""
    from typer.testing import CliRunner

    from harness.cli import app

    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(app, [str(a) for a in args])

    return invoke


def run_harness(*args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    """Run `python -m harness` in a real subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "harness", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **env},
        timeout=180,
    )


def run_cli(*args: str | Path, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    """Run a `harness` command in this process, as `run_harness` runs it in a subprocess: the
    same arguments, working folder and added environment variables give its exit code, stdout
    and stderr, without a second of start-up. For tests of what a command does; tests of the
    process itself (start-up, a real exit, `kill -9`, concurrent processes) use `run_harness`.
    What a command leaves in this process that a new one would not have (the folder on
    `sys.path`, variables declared secret) is undone after it; plug-ins, which register for the
    life of a process (`harness.project.load_plugins`), are not: their tests use `run_harness`."""
    from typer.testing import CliRunner

    from harness import secrets
    from harness.cli import app
    from harness.cli._common import PLUGIN_ERRORS

    here, path, declared = Path.cwd(), list(sys.path), set(secrets.DECLARED)
    os.chdir(cwd)
    try:
        done = CliRunner().invoke(app, [str(a) for a in args], env=env, prog_name="harness")
    finally:
        os.chdir(here)
        sys.path[:] = path
        secrets.DECLARED.clear()
        secrets.DECLARED.update(declared)
    code, stderr = done.exit_code, done.stderr
    if isinstance(done.exception, PLUGIN_ERRORS):  # as `harness.cli.main` reports them
        code, stderr = 2, f"{stderr}harness: {done.exception}\n"
    elif done.exception is not None and not isinstance(done.exception, SystemExit):
        raise done.exception  # a crash: its traceback, not a line in an assertion message
    return subprocess.CompletedProcess(list(args), code, done.stdout, stderr)


def scripted_eval(
    store: Path, agent: str, *extra: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """`run-eval` of the support suite with the scripted agent and judge into `store`, tracing
    off, in this process; it must succeed."""
    done = run_cli(
        "run-eval",
        "--tasks",
        "tasks/support",
        "--agent",
        agent,
        "--set",
        SCRIPTED,
        "--judge-model",
        JUDGE,
        "--store",
        store,
        "--no-traces",
        *extra,
        **env,
    )
    assert done.returncode == 0, done.stderr
    return done


def newest_run(store: Path) -> str:
    """The id of the run stored last (runs of the same second share `created_at`, and their
    ids end in random letters: the insertion order says which came last)."""
    with sqlite3.connect(store) as db:
        return db.execute("SELECT id FROM runs ORDER BY rowid DESC").fetchone()[0]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A copy of the bundled example folders that a test may edit freely."""
    for folder in ("tasks", "personas", "agents", "dags", "ci"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    return tmp_path


@pytest.fixture
def listener():
    """A TCP server on the host's 127.0.0.1, for what a sandboxed checker must not reach."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.3)
    yield server
    server.close()


def play_case(
    case: TaskCase, variant: AgentVariant, runtime: ModelRuntime | None = None, trial: int = 0
) -> Transcript:
    """One episode (trial `trial`, seeded by it) of a loaded task by an agent variant, in this
    process, as the engine plays it; `runtime` (closed after) defaults to quick model calls
    without retries."""
    import asyncio

    from harness.models import CallPolicy, ModelRuntime
    from harness.sim.agent import make_agent
    from harness.sim.episode import EpisodeSpec, run_episode

    runtime = runtime or ModelRuntime(
        policy=CallPolicy(timeout_s=5, max_retries=0, backoff_base_s=0.01)
    )

    async def go() -> Transcript:
        try:
            spec = EpisodeSpec(
                task=case.task,
                persona=case.persona,
                agent=make_agent(variant, runtime),
                variant_hash="h",
                initial_state=case.state,
                trial=trial,
                seed=trial,
                runtime=runtime,
            )
            return await run_episode(spec)
        finally:
            await runtime.aclose()

    return asyncio.run(go())


def install_package(
    source: Path, tmp_path_factory: pytest.TempPathFactory, name: str, ignore: tuple[str, ...] = ()
) -> Path:
    """A package of the repository built and installed as `pip install` would for a user, but
    into a folder of its own (put it on PYTHONPATH): its entry points are what harness finds.
    Its dependencies must be installed already."""
    build = tmp_path_factory.mktemp(f"{name}-build")
    shutil.copytree(source, build / "src", ignore=shutil.ignore_patterns(*ignore))
    site = tmp_path_factory.mktemp(f"{name}-site")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(site), str(build / "src")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return site


def reworded_app(app: str, argument: str, prefix: str) -> str:
    """The source of an agent module whose `respond` and `respond_fixed` are the test app
    `tests/apps/<app>.py`'s, calling their tools with the free text `argument` worded another way
    (`prefix` + the text in lower case), as another model would word it: calls production
    never made, which a replay must still answer."""
    return f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from tests.apps import {app}


class Reworded:
    def __init__(self, tools):
        self._tools = tools

    def __getattr__(self, name):
        return getattr(self._tools, name)

    def call(self, name, **arguments):
        if {argument!r} in arguments:
            arguments[{argument!r}] = {prefix!r} + arguments[{argument!r}].lower()
        return self._tools.call(name, **arguments)


def respond(conversation, tools):
    return {app}.respond(conversation, Reworded(tools))


def respond_fixed(conversation, tools):
    return {app}.respond_fixed(conversation, Reworded(tools))
"""

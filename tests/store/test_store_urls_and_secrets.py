"""`--store` names a file or a PostgreSQL database and nothing else, a store URL's password is
never printed, and a key read through any `api_key_env` is masked whatever the variable's name
(in every output of a real process: what its libraries log too)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.secrets import DECLARED, declare_secret_env, redact
from harness.store_location import BadStoreTarget, StoreLocation
from harness.testing.fake_server import FakeServer
from tests.conftest import ROOT, run_cli, run_harness

SECRET = "pw-SECRET-xyz"
SCRIPTED = f"agent.model={{id: scripted, script: {ROOT / 'agents/scripts/support.yaml'}}}"


def tiny_eval(store: str) -> list[str]:
    """The arguments of a one-task scripted `run-eval` into `store`, from any folder."""
    return [
        "run-eval",
        "--tasks",
        str(ROOT / "tasks/support/order-status.yaml"),
        "--agent",
        str(ROOT / "agents/support-baseline.yaml"),
        "--set",
        SCRIPTED,
        "--no-traces",
        "--store",
        store,
    ]


def files_text(folder: Path) -> str:
    return "".join(p.read_bytes().decode("latin-1") for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize(
    ("text", "target", "postgres"),
    [
        ("results.db", "results.db", False),
        ("sqlite:///results.db", "results.db", False),
        ("sqlite:////tmp/r.db", "/tmp/r.db", False),
        ("postgresql://u:pw@h/db", "postgresql://u:pw@h/db", True),
        ("postgres://u@h/db", "postgres://u@h/db", True),
    ],
)
def test_a_path_sqlite_or_postgres_url_is_a_store(text: str, target: str, postgres: bool) -> None:
    location = StoreLocation.of(text)
    assert (location.target, location.is_postgres) == (target, postgres)


REFUSED = [
    f"mysql://u:{SECRET}@h/db",
    f"postgresql+psycopg://u:{SECRET}@h/db",
    f"pg://u:{SECRET}@h/db",
    f"https://u:{SECRET}@example.com/store",
    "file:mem.db?mode=memory",
    ":memory:",
    "sqlite:///:memory:",
    f"sqlite:///mysql://u:{SECRET}@h/db",
]


@pytest.mark.parametrize("text", REFUSED)
def test_other_urls_and_memory_are_refused(text: str) -> None:
    with pytest.raises(BadStoreTarget) as refused:
        StoreLocation.of(text)
    assert SECRET not in str(refused.value)


@pytest.mark.parametrize("text", REFUSED)
@pytest.mark.parametrize("how", ["option", "env", "run-eval"])
def test_a_refused_store_is_one_line_exit_2_and_nothing_created(
    tmp_path: Path, text: str, how: str
) -> None:
    if how == "option":
        done = run_cli("runs", "list", "--store", text, cwd=tmp_path)
    elif how == "env":
        done = run_cli("runs", "list", cwd=tmp_path, HARNESS_STORE=text)
    else:
        done = run_cli(*tiny_eval(text), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("harness: --store: ") and "not a results store" in line
    assert SECRET not in done.stdout + done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_sqlite_url_store_works_end_to_end(tmp_path: Path) -> None:
    done = run_cli(*tiny_eval(f"sqlite:///{tmp_path / 'r.db'}"), COLUMNS="300")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "r.db").is_file()
    assert f"stored in {tmp_path / 'r.db'}" in done.stdout
    listed = run_cli("runs", "list", "--store", f"sqlite:///{tmp_path / 'r.db'}")
    assert listed.returncode == 0 and "support-baseline" in listed.stdout, listed.stderr


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgresql://u@127.0.0.1:99999/x", "port '99999' is out of range"),
        (f"postgresql://u:{SECRET}@127.0.0.1:0/x", "port '0' is out of range"),
        (f"postgres://u:{SECRET}@no-such-host.invalid/x", "failed to resolve host"),
    ],
)
def test_a_bad_port_or_host_is_one_line_exit_2(url: str, message: str) -> None:
    pytest.importorskip("psycopg")
    done = run_cli("runs", "list", "--store", url)
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = done.stderr.splitlines()
    assert "not a PostgreSQL URL" in line and message in line, line
    assert SECRET not in done.stdout + done.stderr


@pytest.mark.parametrize("protocol", ["anthropic", "openai"])
def test_a_key_read_through_any_api_key_env_never_reaches_the_store(
    tmp_path: Path, protocol: str
) -> None:
    """The fake server echoes the credential (as `Bearer ...`, a shape masked anyway) and the
    user's first message, which here holds the bare key, as a model repeating it would."""
    key = "plain-vllm-auth-4242-value"  # neither its name nor its shape says "secret"
    with FakeServer(echo_auth=True).running() as server:
        base_url = f"{server.url}/v1" if protocol == "openai" else server.url
        done = run_harness(
            "run-eval",
            "--tasks",
            "tasks/support/order-status.yaml",
            "--agent",
            "agents/support-baseline.yaml",
            "--store",
            f"sqlite:///{tmp_path / 'results.db'}",
            "--cache",
            tmp_path / "cache.db",
            "--set",
            f"agent.model={{id: {protocol}/fake-model, base_url: {base_url}, "
            "api_key_env: VLLM_AUTH}",
            "--set",
            "task.end.max_turns=2",
            "--set",
            f"task.start.first_message=Where is my order? My code is {key}",
            "--retries",
            "0",
            VLLM_AUTH=key,
            COLUMNS="300",
        )
        assert server.snapshot()["requests"] >= 1, "the server was really called"
    assert done.returncode == 0, done.stderr
    everything = done.stdout + done.stderr + files_text(tmp_path)
    assert "[seen" in everything, "the echoed credential reached the transcript"
    assert key not in everything and "[REDACTED]" in everything


def test_secret_env_masks_a_named_variable(tmp_path: Path) -> None:
    value = "plain-value-of-my-var-777"
    done = run_harness(
        "--secret-env", "MY_VAR", "runs", "list", "--store", tmp_path / value, MY_VAR=value
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert value not in done.stdout + done.stderr and "[REDACTED]" in done.stderr


def test_a_declared_variable_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_AUTH", "plain-declared-value-1")
    monkeypatch.setattr("harness.secrets.DECLARED", DECLARED - {"VLLM_AUTH"})
    assert redact("auth plain-declared-value-1") == "auth plain-declared-value-1"
    declare_secret_env("VLLM_AUTH")
    assert redact("auth plain-declared-value-1") == "auth [REDACTED]"

"""An API key planted in the environment never appears in any output, store or cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.secrets import redact
from harness.testing.fake_server import FakeServer, Faults
from tests.conftest import ROOT, run_harness

OPENAI_KEY = "sk-planted-OPENAI-0123456789abcdef"
ANTHROPIC_KEY = "sk-ant-planted-ANTHROPIC-0123456789"
CUSTOM_KEY = "plain-custom-token-98765"


def files_text(folder: Path) -> str:
    return "".join(p.read_bytes().decode("latin-1") for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize(
    ("protocol", "faults"),
    [
        ("openai", None),
        ("anthropic", None),
        ("openai", Faults(rate_401_echo=1.0)),
        ("anthropic", Faults(rate_401_echo=1.0)),
    ],
    ids=["openai-echo", "anthropic-echo", "openai-401", "anthropic-401"],
)
def test_planted_keys_never_leak(tmp_path: Path, protocol: str, faults: Faults | None) -> None:
    with FakeServer(faults=faults, echo_auth=True).running() as server:
        base_url = f"{server.url}/v1" if protocol == "openai" else server.url
        done = run_harness(
            "run-eval",
            "--tasks",
            "tasks/support/order-status.yaml",
            "--agent",
            "agents/support-baseline.yaml",
            "--store",
            tmp_path / "results.db",
            "--cache",
            tmp_path / "cache.db",
            "--set",
            f"agent.model={{id: {protocol}/fake-model, base_url: {base_url}, "
            "api_key_env: MY_AGENT_TOKEN}",
            "--set",
            "task.end.max_turns=2",
            "--retries",
            "0",
            OPENAI_API_KEY=OPENAI_KEY,
            ANTHROPIC_API_KEY=ANTHROPIC_KEY,
            MY_AGENT_TOKEN=CUSTOM_KEY,
            COLUMNS="300",
        )
        assert server.snapshot()["requests"] >= 1, "the server was really called"
    if faults is None:
        assert done.returncode == 0, done.stderr
        assert "[seen" in files_text(tmp_path), "the echoed credential reached the transcript"
    else:  # the agent's model refused every call: every episode lacks evidence, which is exit 3
        assert done.returncode == 3, done.stderr
        assert "HTTP 401" in done.stdout and "every episode errored (agent_model 1)" in done.stdout
    everything = done.stdout + done.stderr + files_text(tmp_path)
    for key in (OPENAI_KEY, ANTHROPIC_KEY, CUSTOM_KEY):
        assert key not in everything
    assert "[REDACTED]" in everything


def test_redact_masks_environment_secrets_and_key_shapes(monkeypatch) -> None:
    monkeypatch.setenv("SERVICE_PASSWORD", "hunter2hunter2")
    text = "auth hunter2hunter2, header Bearer abcdefghijklmnop, key sk-ABCDEFGHIJKLMNOPQRSTU"
    assert redact(text) == "auth [REDACTED], header [REDACTED], key [REDACTED]"
    assert redact("order O-1002 shipped") == "order O-1002 shipped"


def test_validation_errors_do_not_echo_secrets_from_state_files(tmp_path: Path) -> None:
    """A secret pasted into a state file, where the domain wants something else, is reported
    without its value: a key-shaped string, and the value of a secret environment variable."""
    (tmp_path / "personas").symlink_to(ROOT / "personas")
    state = json.loads((ROOT / "tasks/support/data/desk.json").read_text())
    state["refund_window_days"] = OPENAI_KEY
    state["customers"]["C-100"]["tier"] = CUSTOM_KEY
    (tmp_path / "desk.json").write_text(json.dumps(state))
    task = (ROOT / "tasks/support/order-status.yaml").read_text()
    (tmp_path / "task.yaml").write_text(task.replace("data/desk.json", "desk.json"))
    done = run_harness("validate", tmp_path / "task.yaml", MY_AGENT_TOKEN=CUSTOM_KEY)
    assert done.returncode == 2
    output = done.stdout + done.stderr
    assert OPENAI_KEY not in output and CUSTOM_KEY not in output
    assert "start.state.refund_window_days" in output and "[REDACTED]" in output
    assert "start.state.customers.C-100.tier" in output

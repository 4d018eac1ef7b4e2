"""The plug-in surface: `harness.sdk` gathers what plug-ins import, the names stay importable
from where they were (the public API is a promise), trace and replay hooks live in a mix-in that
a plain domain never needs, and Docker is an extra."""

from __future__ import annotations

import ast
import asyncio
import importlib
import sys
import textwrap
import warnings
from typing import Any

import pytest

import harness.sdk
from harness.domains import DOMAINS
from harness.domains.trace_replay import (
    TraceReplay,
    expected_state,
    for_state,
    id_patterns,
    observed_state,
    tools_of_state,
)
from harness.grading.checks import HANDLERS
from harness.specs.checks import CHECK_KINDS
from harness.transcript import EndReason, Message, ToolSpec, Transcript
from tests.conftest import ROOT


@pytest.fixture
def registries(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a test registers is forgotten after it."""
    for registry in (DOMAINS, CHECK_KINDS, HANDLERS):
        registry.names()  # loaded first, so that what loading registers stays
        monkeypatch.setattr(registry, "_entries", dict(registry._entries))


# Where each name of `harness.sdk` was importable from before it: it stays importable there.
OLD_HOMES = {
    "harness.domains": "Environment ToolError ToolTimeout ToolUnavailable register_domain tool",
    "harness.grading.checks": "CheckContext register_check",
    "harness.grading.result": "Finding",
    "harness.models": "ChatModel Completion CompletionParams ModelError register_provider",
    "harness.models.base": "ProviderPolicy",
    "harness.specs.agent": "ModelRef",
    "harness.specs.checks": "CheckBase References",
    "harness.transcript": "Message ToolCall ToolSpec Transcript Usage",
    "harness.domains.trace_replay": "TraceReplay",
}


def test_the_old_import_paths_give_the_same_objects() -> None:
    old = {
        name: getattr(importlib.import_module(module), name)
        for module, names in OLD_HOMES.items()
        for name in names.split()
    }
    assert sorted(old) == sorted(harness.sdk.__all__)
    for name, thing in old.items():
        assert getattr(harness.sdk, name) == thing, name  # `==`: a registry's bound method
    public = {name for name in vars(harness.sdk) if not name.startswith("_")}
    assert public == set(harness.sdk.__all__)


def test_the_guides_example_plug_in_works(registries: None) -> None:
    doc = harness.sdk.__doc__ or ""
    example = textwrap.dedent(doc[doc.index("\n    from typing") : doc.index("\nA module like")])
    namespace: dict[str, Any] = {"__name__": "sdk_guide_example"}
    exec(compile(example, "sdk guide", "exec", dont_inherit=True), namespace)

    env = DOMAINS.get("bookshop")({"stock": {"Dune": 2}})
    assert asyncio.run(env.call("stock", {"title": "Dune"})).content == "2"
    spec = CHECK_KINDS.get("mentions_title").model_validate(
        {"kind": "mentions_title", "title": "Dune"}
    )
    transcript = Transcript(
        task_id="t",
        variant="v",
        variant_hash="h",
        messages=[Message(role="assistant", content="Dune: 2 copies")],
        end_reason=EndReason.USER_STOP,
    )
    found = HANDLERS.get("mentions_title")(spec, transcript, None)
    assert found.outcome == "pass"


class Plain(harness.sdk.Environment):
    """A domain author's domain: no trace hooks."""

    @harness.sdk.tool
    def ping(self) -> str:
        """Answer."""
        return "pong"


def test_a_plain_domain_needs_no_trace_hooks_and_gets_the_defaults() -> None:
    for name in ("id_patterns", "observed_state", "expected_state", "for_state", "with_tools"):
        assert not hasattr(Plain, name)
    assert not tools_of_state(Plain)
    assert for_state(Plain, {"tools": []}) is Plain
    assert (id_patterns(Plain), observed_state(Plain, []), expected_state(Plain, [])) == ({},) * 3
    assert Plain.tool_names() == ["ping"]


def test_the_bundled_trace_domains_use_the_mix_in() -> None:
    support, replay = DOMAINS.get("support"), DOMAINS.get("replay")
    assert issubclass(support, TraceReplay) and issubclass(replay, TraceReplay)
    assert not tools_of_state(support) and tools_of_state(replay)
    assert id_patterns(support)["order_id"]
    tools = [{"name": "echo", "description": "", "parameters": {"type": "object"}}]
    assert for_state(replay, {"tools": tools}).tool_names() == ["echo"]


def test_hooks_are_read_only_from_a_domain_that_mixes_in_trace_replay() -> None:
    class Shop(harness.sdk.TraceReplay, harness.sdk.Environment):
        id_patterns = {"ticket": r"T-\d+"}

        @classmethod
        def observed_state(cls, calls: list[Any]) -> dict[str, Any]:
            return {"seen": len(calls)}

        @classmethod
        def for_state(cls, state: dict[str, Any]) -> type[harness.sdk.Environment]:
            return cls.with_tools([ToolSpec.model_validate(t) for t in state["tools"]])

        def call_data_tool(self, name: str, arguments: dict[str, Any]) -> Any:
            return {"called": name, **arguments}

    assert observed_state(Shop, [("a", {}, 1)]) == {"seen": 1}
    assert expected_state(Shop, []) == {} and id_patterns(Shop) == {"ticket": r"T-\d+"}
    tools = [{"name": "echo", "description": "", "parameters": {"type": "object"}}]
    bound = for_state(Shop, {"tools": tools})
    assert issubclass(bound, Shop) and bound.tool_names() == ["echo"]
    outcome = asyncio.run(bound({}).call("echo", {"x": 1}))
    assert outcome.content == '{"called": "echo", "x": 1}'

    # the same methods without the mix-in would silently not be hooks: refused with the fix
    with pytest.raises(TypeError, match=r"class Unmixed\(TraceReplay, Environment\)"):

        class Unmixed(harness.sdk.Environment):
            id_patterns = {"ticket": r"T-\d+"}

            @classmethod
            def observed_state(cls, calls: list[Any]) -> dict[str, Any]:
                return {"seen": len(calls)}


def test_docker_is_an_extra_imported_only_when_used(monkeypatch: pytest.MonkeyPatch) -> None:
    for path in sorted((ROOT / "harness").rglob("*.py")):
        tree = ast.parse(path.read_text())
        functions = [
            f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
        ]
        local = {id(node) for f in functions for node in ast.walk(f)}
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if id(node) not in local:  # imported when the module is, not when a function runs
                assert not [n for n in names if n.split(".")[0] == "docker"], path
    from harness.grading.sandbox import docker_available, isolation_problem

    monkeypatch.setitem(sys.modules, "docker", None)  # as if not installed
    monkeypatch.setenv("HARNESS_SANDBOX", "docker")
    docker_available.cache_clear()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert docker_available() is False
        assert "pip install 'harness[docker]'" in (isolation_problem() or "")
    finally:
        docker_available.cache_clear()

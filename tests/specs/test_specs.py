"""Spec models and the loader: extends chains, overrides, content hashes and JSON Schemas."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from harness.specs.kinds import KINDS
from harness.specs.load import load_agent
from harness.specs.located import SpecError, read_yaml
from harness.specs.overrides import Override
from harness.specs.schema import json_schema
from tests.conftest import ROOT

BUNDLED_FOLDERS = ("tasks", "personas", "agents", "dags", "ci/gate.yaml", "climbs")
WORKFLOW = ROOT / "ci/github-actions.yml"  # GitHub's format, tested in test_gate.py


def bundled_yaml() -> list[Path]:
    folders = ("tasks", "personas", "agents", "dags", "ci", "climbs")
    found = {p for folder in folders for p in (ROOT / folder).rglob("*.y*ml")}
    return sorted(found - {WORKFLOW})


def write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_every_bundled_yaml_file_validates(cli) -> None:
    result = cli("validate", *BUNDLED_FOLDERS)
    assert result.exit_code == 0, result.stderr
    validated = {line.split()[-1] for line in result.stdout.splitlines() if line.startswith("ok")}
    assert validated == {str(p.relative_to(ROOT)) for p in bundled_yaml()}
    kinds = {line.split()[1] for line in result.stdout.splitlines() if line.startswith("ok")}
    assert kinds == set(KINDS), "the bundle shows every file kind"


@pytest.mark.parametrize("path", bundled_yaml(), ids=lambda p: str(p.relative_to(ROOT)))
def test_bundled_file_matches_its_exported_json_schema(path: Path) -> None:
    data, _ = read_yaml(path)
    jsonschema.validate(data, json_schema(data["kind"]))


@pytest.mark.parametrize("kind", list(KINDS))
def test_schema_command_prints_a_documented_schema(cli, kind: str) -> None:
    result = cli("schema", kind)
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    for name, prop in schema["properties"].items():
        assert prop.get("description"), f"{kind}.{name} has no description"


def test_schema_of_unknown_kind_is_a_one_line_error(cli) -> None:
    result = cli("schema", "widget")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "schema: unknown kind 'widget'; expected one of: task, persona, agent, dag, gate, script, "
        "climb, check-input, domain"
    )


def test_extends_merges_child_over_parent_and_can_drop_a_skill(workspace: Path) -> None:
    agents = workspace / "agents"
    write(
        agents / "child.yaml",
        {
            "kind": "agent",
            "name": "child",
            "extends": "support-careful.yaml",
            "skills": {"tone": None, "extra": "Say hello."},
            "parameters": {"max_tool_steps": 3},
        },
    )
    variant = load_agent(agents / "child.yaml").spec
    assert set(variant.skills) == {"refund-policy", "extra"}
    assert variant.parameters.max_tool_steps == 3
    assert variant.parameters.max_tokens == 96  # inherited through two levels
    assert variant.tools[0] == "find_customer"
    assert variant.model.id == "local/smollm2"
    prompt = variant.full_system_prompt()
    assert prompt.index("## extra") < prompt.index("## refund-policy")


def test_error_in_an_inherited_value_points_at_the_parent_file(workspace: Path) -> None:
    agents = workspace / "agents"
    base = yaml.safe_load((agents / "support-baseline.yaml").read_text())
    base["parameters"]["temperature"] = 9
    write(agents / "support-baseline.yaml", base)
    with pytest.raises(SpecError) as caught:
        load_agent(agents / "support-careful.yaml")
    [problem] = caught.value.problems
    assert problem.location.source.endswith("agents/support-baseline.yaml")
    assert problem.path == "parameters.temperature"


def test_override_wins_over_every_file() -> None:
    over = [Override.parse("parameters.temperature=0.5"), Override.parse("skills.tone=Be terse.")]
    variant = load_agent(ROOT / "agents/support-careful.yaml", over).spec
    assert variant.parameters.temperature == 0.5
    assert variant.skills["tone"] == "Be terse."


# ------------------------------------------------------------------ content hash


def baseline_hash() -> str:
    return load_agent(ROOT / "agents/support-baseline.yaml").spec.content_hash()


def test_hash_is_stable_across_processes() -> None:
    code = (
        "from pathlib import Path; from harness.specs.load import load_agent; "
        "print(load_agent(Path('agents/support-baseline.yaml')).spec.content_hash())"
    )
    hashes = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={"PYTHONHASHSEED": seed},
            check=True,
        ).stdout.strip()
        for seed in ("0", "1", "12345")
    }
    assert hashes == {baseline_hash()}


def test_hash_ignores_key_order_name_and_where_a_value_was_inherited(workspace: Path) -> None:
    agents = workspace / "agents"
    original = yaml.safe_load((agents / "support-baseline.yaml").read_text())
    reordered = dict(reversed(list(original.items())))
    reordered["name"] = "same-bytes-other-name"
    reordered["parameters"] = dict(reversed(list(original["parameters"].items())))
    write(agents / "reordered.yaml", reordered)
    write(
        agents / "empty-diff.yaml",
        {"kind": "agent", "name": "diff", "extends": "support-baseline.yaml"},
    )
    careful = load_agent(agents / "support-careful.yaml").spec
    flat = careful.model_dump(mode="json", exclude={"extends"})
    write(agents / "flat-careful.yaml", flat)

    expected = baseline_hash()
    assert load_agent(agents / "reordered.yaml").spec.content_hash() == expected
    assert load_agent(agents / "empty-diff.yaml").spec.content_hash() == expected
    assert load_agent(agents / "flat-careful.yaml").spec.content_hash() == careful.content_hash()


def test_hash_follows_the_script_content_not_its_path(workspace: Path) -> None:
    agents = workspace / "agents"
    (agents / "moved").mkdir()
    (agents / "moved" / "same.yaml").write_bytes((agents / "scripts/support.yaml").read_bytes())

    def scripted_variant(name: str, script: str) -> str:
        path = write(
            agents / f"{name}.yaml",
            {
                "kind": "agent",
                "name": name,
                "extends": "support-baseline.yaml",
                "model": {"id": "scripted", "script": script},
            },
        )
        return load_agent(path).spec.content_hash()

    original = scripted_variant("original", "scripts/support.yaml")
    assert scripted_variant("moved", "moved/same.yaml") == original
    with (agents / "moved" / "same.yaml").open("a") as script:
        script.write("# a changed byte\n")
    assert scripted_variant("moved", "moved/same.yaml") != original


@pytest.mark.parametrize(
    "override",
    [
        "system_prompt=You are a pirate.",
        "skills.tone=Be curt.",
        "parameters.temperature=0.7",
        "tools=[get_order]",
        "model={id: openai/gpt-4.1-mini}",
        "parameters.max_tool_steps=2",
    ],
)
def test_hash_changes_when_anything_reaching_the_model_changes(override: str) -> None:
    changed = load_agent(ROOT / "agents/support-baseline.yaml", [Override.parse(override)])
    assert changed.spec.content_hash() != baseline_hash()

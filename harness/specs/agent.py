"""An agent variant: model, prompt, tools and skills, written as a small diff of production."""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import re
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from pydantic import AfterValidator, BaseModel, Field, field_validator, model_validator

from harness.imports import module_file
from harness.secrets import declare_secret_env
from harness.specs.base import Shorthand, Spec
from harness.specs.located import PathKey
from harness.transcript import ToolSpec

# Fields that name or locate a variant, or tune how calls are made, but never change what the
# model receives; they are left out of its hash.
UNHASHED_FIELDS: dict[str, Any] = {
    "kind": True,
    "name": True,
    "description": True,
    "extends": True,
    "model": {"api_key_env", "max_concurrency"},
}


class ModelRef(Shorthand):
    """Which model answers, as a provider string plus connection settings (a string is the id)."""

    shorthand_field = "id"
    id: str = Field(
        description="Provider and model, e.g. 'openai/gpt-4.1-mini', "
        "'anthropic/claude-sonnet-4-5', 'local/smollm2', or 'scripted'."
    )
    script: str | None = Field(
        default=None,
        description="For 'scripted': the rules file, relative to the file that names it (on "
        "the command line and in a DAG's parameters, to the working folder).",
    )
    base_url: str | None = Field(
        default=None, description="Endpoint of an OpenAI-compatible server (vLLM, Ollama, ...)."
    )
    api_key_env: str | None = Field(
        default=None, description="Environment variable holding the API key (never the key)."
    )
    max_concurrency: int | None = Field(
        default=None, ge=1, description="Most calls in flight to this endpoint at once."
    )
    sha256: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{64}$",
        description="For 'local/<path.gguf>': checksum the model file must have.",
    )

    @model_validator(mode="after")
    def _script_only_for_scripted(self) -> ModelRef:
        if self.script is not None and self.id != "scripted":
            raise ValueError("'script' is only allowed with id 'scripted'")
        return self

    @model_validator(mode="after")
    def _key_env_is_secret(self) -> ModelRef:
        """The variable that holds the key is secret, whatever its name, from the moment a
        spec names it: redacted in the store, traces, reports and errors."""
        if self.api_key_env:
            declare_secret_env(self.api_key_env)
        return self


def missing_scripts(spec: BaseModel, keys: PathKey = ()) -> list[tuple[PathKey, str]]:
    """The `script` of every scripted model a validated spec names (its own, a check's, a node
    parameter's) whose rules file does not exist, by the field that names it: found when the
    spec is loaded, not when the model is first asked, mid-run, as an error in a table. A file
    written in a spec file was resolved against that file; one given on the command line or in
    a DAG's parameters is relative to the working folder, as the model reads it."""
    if isinstance(spec, ModelRef):
        if spec.script is not None and not Path(spec.script).is_file():
            return [((*keys, "script"), f"file not found: {spec.script}")]
        return []
    found: list[tuple[PathKey, str]] = []
    for name, key in _fields_holding_models(type(spec)):
        found += _scripts_in(getattr(spec, name), (*keys, key))
    return found


def _scripts_in(value: Any, keys: PathKey) -> list[tuple[PathKey, str]]:
    if isinstance(value, BaseModel):
        return missing_scripts(value, keys)
    if isinstance(value, list | tuple):
        return [p for i, item in enumerate(value) for p in _scripts_in(item, (*keys, i))]
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in _scripts_in(item, (*keys, key))]
    return []


@functools.cache
def _fields_holding_models(model: type[BaseModel]) -> tuple[tuple[str, str], ...]:
    """(name, key in the data) of each field of a model that can hold a `ModelRef` at any
    depth: only those are walked, so a domain's state (thousands of records) or a task's plain
    data never is."""
    return tuple(
        (name, info.alias or name)
        for name, info in model.model_fields.items()
        if _reaches(info.annotation, frozenset({model}))
    )


def _reaches(annotation: Any, seen: frozenset[type]) -> bool:
    """Whether a value of this type can hold a `ModelRef` (`seen`: the models on the way)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if issubclass(annotation, ModelRef):
            return True
        if annotation in seen:
            return False
        inner = seen | {annotation}
        return any(_reaches(info.annotation, inner) for info in annotation.model_fields.values())
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _reaches(typing.get_args(annotation)[0], seen)
    if origin in (typing.Union, types.UnionType, list, tuple, dict, set, frozenset):
        return any(_reaches(arg, seen) for arg in typing.get_args(annotation))
    return False


class DomainTexts(Protocol):
    """What a prompt may quote of a domain (an `Environment` class has both)."""

    description: str
    policy: str


# The tokens of a prompt that quote the domain, replaced by exactly these names (no other
# braces: prompts hold JSON).
DOMAIN_TOKENS = re.compile(r"\{domain\.(policy|description)\}")


def _known_domain_tokens(prompt: str) -> str:
    """A prompt whose `{domain.NAME}` tokens are all filled: a misspelt one (`{domain.polcy}`)
    would reach the model as written, silently without the policy it was meant to quote."""
    for name in re.findall(r"\{domain\.([\w-]+)\}", prompt):
        if name not in ("policy", "description"):
            close = difflib.get_close_matches(name, ["policy", "description"], n=1)
            hint = f"did you mean `{{domain.{close[0]}}}`?" if close else "no other is filled"
            raise ValueError(
                f"`{{domain.{name}}}` is never filled: a prompt quotes only `{{domain.policy}}` "
                f"and `{{domain.description}}`; {hint}"
            )
    return prompt


# A prompt text: its `{domain.NAME}` tokens must be ones `fill_domain` fills.
PromptText = Annotated[str, AfterValidator(_known_domain_tokens)]


def fill_domain(prompt: str, domain: DomainTexts) -> str:
    """A prompt with `{domain.policy}` and `{domain.description}` replaced by the domain's texts
    (in one pass: a policy that quotes a token is not filled again)."""
    if "{domain." not in prompt:
        return prompt
    return DOMAIN_TOKENS.sub(lambda token: getattr(domain, token[1]) or "", prompt)


class Parameters(Spec):
    """Generation and loop parameters of the agent."""

    temperature: float = Field(default=0.0, ge=0, le=2, description="Sampling temperature.")
    max_tokens: int = Field(default=1024, ge=1, description="Most tokens per model reply.")
    max_tool_steps: int = Field(
        default=8, ge=1, description="Most model calls the agent makes for one user turn."
    )


class AgentVariant(Spec):
    """A resolved agent variant (after `extends`)."""

    kind: Literal["agent"] = Field(description="File kind.")
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="Variant name.")
    description: str = Field(default="", description="What this variant changes and why.")
    extends: str | None = Field(
        default=None, description="Parent variant file (relative path) this one is a diff of."
    )
    runner: Literal["llm", "python", "http"] = Field(
        default="llm",
        description="How the agent runs: 'llm', the built-in tool-calling loop over `model`; "
        "'python', your own code at `entry`; 'http', your agent service at `model.base_url` "
        "(an OpenAI-compatible chat endpoint whose tools run server-side).",
    )
    reports_tool_calls: bool = Field(
        default=False,
        description="For runner 'http': the service reports the tool calls it ran for a turn as "
        "the `tool_calls` of its reply message (OpenAI format: id, function name, JSON "
        "arguments), beside the reply's `content`. The harness records them and replays them "
        "on the task's environment, so that tool_called, tool_order, json_schema (tool "
        "arguments) and state checks see them; without it such checks cannot be graded and "
        "their tasks are refused.",
    )
    entry: str | None = Field(
        default=None,
        description="For runner 'python': 'package.module:function' or 'file.py:function' "
        "(relative to the variant file).",
    )
    model: ModelRef | None = Field(
        default=None, description="The model, as a string or a mapping with settings."
    )
    system_prompt: PromptText = Field(
        default="",
        description="Base system prompt. `{domain.policy}` and `{domain.description}` (these "
        "exact tokens, in it and in skills) are replaced by the policy and description of the "
        "task's domain when the agent plays it; other braces are left as written.",
    )
    skills: dict[str, PromptText] = Field(
        default_factory=dict,
        description="Named prompt snippets appended to the system prompt, in name order; "
        "set one to null in a child to drop it.",
    )
    tools: list[str] = Field(default_factory=list, description="Domain tools the agent may call.")
    tool_descriptions: dict[str, str] = Field(
        default_factory=dict,
        description="The description the model reads of a tool, by tool name, in place of the "
        "domain's docstring (a tool not named keeps its docstring).",
    )
    parameters: Parameters = Field(default_factory=Parameters, description="Generation settings.")

    @field_validator("model")
    @classmethod
    def _scripted_needs_script(cls, model: ModelRef | None) -> ModelRef | None:
        if model is not None and model.id == "scripted" and model.script is None:
            raise ValueError("a scripted agent needs 'script', the rules file it plays")
        return model

    @model_validator(mode="after")
    def _runner_needs(self) -> AgentVariant:
        if self.runner == "llm" and (self.model is None or not self.system_prompt.strip()):
            raise ValueError("runner 'llm' needs a model and a system_prompt")
        if self.runner == "http" and (
            self.model is None
            or self.model.base_url is None
            or not self.model.id.startswith("openai/")
        ):
            raise ValueError("runner 'http' needs model {id: openai/NAME, base_url: URL}")
        if self.runner == "python" and not self.entry:
            raise ValueError("runner 'python' needs an entry 'module:function'")
        if self.reports_tool_calls and self.runner != "http":
            raise ValueError("reports_tool_calls is for runner 'http' (others show every call)")
        unknown = sorted(set(self.tool_descriptions) - set(self.tools)) if self.tools else []
        if unknown:
            raise ValueError(f"tool_descriptions names tools the variant lacks: {unknown}")
        if self.entry is not None and ":" not in self.entry:
            raise ValueError("entry must be 'module:function' or 'file.py:function'")
        return self

    def described(self, specs: list[ToolSpec]) -> list[ToolSpec]:
        """The tools as this variant's model reads them (its own descriptions, where given)."""
        return [
            spec.model_copy(update={"description": self.tool_descriptions[spec.name]})
            if spec.name in self.tool_descriptions
            else spec
            for spec in specs
        ]

    @property
    def shows_tool_calls(self) -> bool:
        """Whether the harness sees the agent's tool calls, and so their effect on the state."""
        return self.runner != "http" or self.reports_tool_calls

    def full_system_prompt(self, domain: DomainTexts | None = None) -> str:
        """The system prompt exactly as the model receives it: with a domain (the environment
        class of the task played), `{domain.policy}` and `{domain.description}` are its texts;
        without one, the tokens stay as written."""
        parts = [self.system_prompt.strip()] if self.system_prompt.strip() else []
        parts += [f"## {name}\n{text.strip()}" for name, text in sorted(self.skills.items())]
        prompt = "\n\n".join(parts)
        return prompt if domain is None else fill_domain(prompt, domain)

    def content_hash(self) -> str:
        """A hash of everything that reaches the model, stable across key order and files.

        Files are hashed by content, not by path (a scripted model's rules, a python agent's
        source), so that moving them changes nothing and editing them changes the hash.
        """
        payload = self.model_dump(mode="json", exclude=UNHASHED_FIELDS)
        for optional in ("reports_tool_calls", "tool_descriptions"):
            if not payload[optional]:  # hashes from before the field existed stay valid
                del payload[optional]
        if self.model is not None and self.model.script is not None:
            payload["model"]["script"] = _sha256(Path(self.model.script).read_bytes())
        if self.entry is not None:
            module, _, function = self.entry.rpartition(":")
            payload["entry"] = f"{_sha256(entry_source(module))}:{function}"
        canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def entry_source(module: str) -> bytes:
    """The source bytes of a python agent's module (a file path, or an importable module)."""
    return module_file(module).read_bytes()

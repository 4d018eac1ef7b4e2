"""An agent variant: model, prompt, tools and skills, written as a small diff of production."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from harness.specs.base import Shorthand, Spec

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
        default=None, description="For 'scripted': the rules file, relative to the variant file."
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
    def _script_for_scripted(self) -> ModelRef:
        if (self.id == "scripted") != (self.script is not None):
            raise ValueError("'script' is required with id 'scripted' and only allowed with it")
        return self


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
    model: ModelRef = Field(description="The model, as a string or a mapping with settings.")
    system_prompt: str = Field(description="Base system prompt.")
    skills: dict[str, str] = Field(
        default_factory=dict,
        description="Named prompt snippets appended to the system prompt, in name order; "
        "set one to null in a child to drop it.",
    )
    tools: list[str] = Field(default_factory=list, description="Domain tools the agent may call.")
    parameters: Parameters = Field(default_factory=Parameters, description="Generation settings.")

    def full_system_prompt(self) -> str:
        """The system prompt exactly as the model receives it."""
        parts = [self.system_prompt.strip()]
        parts += [f"## {name}\n{text.strip()}" for name, text in sorted(self.skills.items())]
        return "\n\n".join(parts)

    def content_hash(self) -> str:
        """A hash of everything that reaches the model, stable across key order and files.

        A script file is hashed by content, not by path, so that moving it changes nothing.
        """
        payload = self.model_dump(mode="json", exclude=UNHASHED_FIELDS)
        if self.model.script is not None:
            script_bytes = Path(self.model.script).read_bytes()
            payload["model"]["script"] = hashlib.sha256(script_bytes).hexdigest()
        canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

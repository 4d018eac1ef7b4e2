"""Model providers behind one `ChatModel` protocol, and the runtime that wraps every call."""

from typing import Any

from harness.models.base import (
    ChatModel,
    Completion,
    CompletionParams,
    ModelError,
    register_provider,
)
from harness.models.runtime import CallPolicy, ModelRuntime, PriceTable, ResponseCache
from harness.specs.agent import ModelRef


def create_model(
    ref: ModelRef | str | dict[str, Any],
    role: str = "agent",
    variables: dict[str, Any] | None = None,
) -> ChatModel:
    """A model with default runtime settings (no cache), for library use and tests."""
    return ModelRuntime().model(ref, role, variables)


__all__ = [
    "CallPolicy",
    "ChatModel",
    "Completion",
    "CompletionParams",
    "ModelError",
    "ModelRuntime",
    "PriceTable",
    "ResponseCache",
    "create_model",
    "register_provider",
]

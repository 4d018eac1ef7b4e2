"""Model providers behind one `ChatModel` protocol."""

from harness.models.base import (
    ChatModel,
    Completion,
    CompletionParams,
    ModelError,
    create_model,
    register_provider,
)

__all__ = [
    "ChatModel",
    "Completion",
    "CompletionParams",
    "ModelError",
    "create_model",
    "register_provider",
]
